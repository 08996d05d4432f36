"""The maths: advantage estimators, losses and rollout-correction weights, as pure functions over tensors.

    advantages.py   ADVANTAGES (grpo, dr_grpo, rloo, pass_at_k, process, gae) and SHAPING, each an equation
    losses.py       the clipped surrogate, CISPO, KL estimators, DPO, aggregation, entropy
    correction.py   importance weights for samples an engine drew (TIS, MIS, IcePop, sequence masks)
    distill.py      distillation from a teacher: the reverse-KL advantage and the dense divergences (DIVERGENCES)
    vocab_blocks.py the sampled token's log-prob, the entropy and the JSD over the whole vocabulary, block by
                    block with closed-form gradients (the trainers' fast path to the same values)

Each function's docstring carries its equation, shapes and paper; docs/algorithms.md holds them all and the
properties the tests prove. Nothing here loads a model, reads a config section or knows a trainer: tensors in,
tensors out.
"""
