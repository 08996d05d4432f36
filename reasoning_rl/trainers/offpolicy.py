"""The trainer's side of rollout correction: its own pi_old for sampled tokens, and the engine's weights.

    correct_batch(learner, tokens) -> (tokens, is_weight, metrics)

With a correction mode other than `none` (docs/algorithms.md §rollout-correction), the batch's `logp_old`
(the engine's log-probs) is replaced by the trainer model's own, computed with no gradient before the
update, and the weights r = pi_old / pi_engine are turned into the mode's importance weights. Both sides
are the distribution each token was drawn from (the engine contract in rollout/base.py: over the kept set where
top-p / top-k cut it, docs/algorithms.md §kept-set), so what is corrected is the engines' difference alone. Metrics: rollout/mismatch_kl, the
share of token ratios outside [rl.mismatch_low, rl.mismatch_high] (rollout/ratio_outside), and the mode's share of
truncated or masked tokens (sequences) and its weights' mean, min, max.
Not here: the losses (algos/losses.py), the weight formulas (algos/correction.py).
"""
from __future__ import annotations

import dataclasses

import torch

from ..models.logprobs import TokenBatch, token_logprobs, trim_padding
from ..models.load import autocast
from ..algos.correction import correct


@torch.no_grad()
def trainer_logprobs(model, tokens: TokenBatch, temperature: float, bf16: bool, batch_size: int = 64,
                     share_prompts: bool = False) -> torch.Tensor:
    """log pi(y_t | x, y_<t) of every row's tokens under `model` (the trainer's current weights: its pi_old; or a
    distillation teacher), in chunks of `batch_size` rows; `share_prompts`: a group's prompt run once; each over its
    kept set where the batch carries floors (top-p / top-k sampling, logprobs.token_logprobs). (n, Tc)"""
    out = torch.zeros_like(tokens.logp_old)
    device = next(model.parameters()).device
    for i in range(0, len(tokens), batch_size):
        sl = slice(i, i + batch_size)
        p_ids, p_mask, c_ids, c_mask = (t.to(device) for t in trim_padding(tokens.p_ids[sl], tokens.p_mask[sl],
                                                                           tokens.c_ids[sl], tokens.c_mask[sl]))
        floor = None if tokens.floor is None else tokens.floor[sl][:, :c_ids.shape[1]].to(device)
        with autocast(bf16, model):
            lp = token_logprobs(model, p_ids, p_mask, c_ids, c_mask, temperature=temperature,
                                share_prompts=share_prompts, floor=floor)
        out[sl, :lp.shape[1]] = lp.float().to(out.device)
    return out


def correct_batch(learner, tokens: TokenBatch) -> tuple[TokenBatch, torch.Tensor | None, dict[str, float]]:
    """(tokens with the trainer's pi_old, the importance weights, metrics); for `none`, the tokens unchanged and no
    weights, with the mismatch still measured when the engine is not `hf`. `learner`: the algorithm's `Learner`."""
    rl, model = learner.rl, learner.model
    if rl.correction == "none" and rl.engine == "hf":
        return tokens, None, {}  # the sampler is the trainer: nothing to measure or correct
    was_training = model.training
    model.eval()
    logp_old = trainer_logprobs(model, tokens, learner.temperature, rl.bf16)
    model.train(was_training)
    w, metrics = correct(rl.correction, logp_old, tokens.logp_old, tokens.loss_mask, rl.is_min, rl.is_max,
                         (rl.mismatch_low, rl.mismatch_high))
    if rl.correction == "none":  # another engine, uncorrected: the mismatch is measured, the batch trains as sampled
        return tokens, None, metrics
    return dataclasses.replace(tokens, logp_old=logp_old), w, metrics
