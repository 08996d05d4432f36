"""The maths: advantage estimators, losses and rollout-correction weights, as pure functions over tensors.

    advantages.py   ADVANTAGES (grpo, dr_grpo, rloo, pass_at_k, process, gae) and SHAPING, each an equation
    losses.py       the clipped surrogate, CISPO, KL estimators, DPO, aggregation, entropy
    correction.py   importance weights for samples an engine drew (TIS, MIS, IcePop, sequence masks)

Each function's docstring carries its equation, shapes and paper; docs/algorithms.md holds them all and the
properties the tests prove. Nothing here loads a model, reads a config section or knows a trainer: tensors in,
tensors out.
"""
