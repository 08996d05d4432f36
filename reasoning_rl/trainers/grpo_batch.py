"""GRPO's batch: verified groups -> padded tensors with advantages -> one minibatch's gradient.

    tensors_from_groups(groups, reward, tok, gcfg) -> (p_ids, p_mask, c_ids, c_mask, logp_old, A) or None
        A (n,) per sequence from the group-normalised advantage, or (n, Tc) per token (process supervision,
        docs/algorithms.md §process, from the `prm` verdicts' step scores); masked samples are left out.
    update_minibatch(model, ref, ranks, gcfg, agg, tensors, idx) -> metrics
        accumulates the PPO-clip gradient of the rows `idx` over length-bucketed micro-batches.

Not here: sampling, verification, the optimiser step or any logging (grpo.py).
"""
from __future__ import annotations


def tensors_from_groups(groups, reward, tok, gcfg):
    """Flatten kept groups into padded tensors for the loss. Returns None when nothing is trainable."""
    import torch

    from ..advantages import ADVANTAGES
    from ..logprobs import pad_completions, pad_prompts

    scores = [[reward.combine(s.verdicts) for s in g.samples] for g in groups]
    R = torch.tensor([[0.0 if x is None else x for x in row] for row in scores], dtype=torch.float32)  # (B, G)
    valid = torch.tensor([[x is not None and len(s.token_ids) > 0 for x, s in zip(row, g.samples)]
                          for row, g in zip(scores, groups)])  # (B, G): masked samples are out of every statistic
    if gcfg.advantage == "process":
        valid &= torch.tensor([[not s.verdicts["prm"].masked for s in g.samples] for g in groups])
        A = _process_advantages(groups, valid, tok)  # (B, G, T): per token
    else:
        kw = {"scale": gcfg.scale_rewards} if gcfg.advantage == "grpo" else {}
        A = ADVANTAGES.get(gcfg.advantage)(R, valid, **kw)  # (B, G)
    rows = []
    for b, g in enumerate(groups):
        for i, s in enumerate(g.samples):
            if not valid[b, i] or (gcfg.mask_truncated_completions and s.truncated):
                continue
            a = A[b, i, :len(s.token_ids)].tolist() if A.dim() == 3 else A[b, i].item()
            rows.append((tok(g.prompt)["input_ids"], list(s.token_ids), list(s.logprobs), a))
    if not rows:
        return None
    p_ids, p_mask = pad_prompts([r[0] for r in rows], tok.pad_token_id)
    c_ids, c_mask = pad_completions([r[1] for r in rows], tok.pad_token_id)
    old = torch.zeros(c_ids.shape)
    for j, r in enumerate(rows):
        old[j, :len(r[2])] = torch.tensor(r[2])
    if A.dim() == 3:  # per-token advantages (process supervision), padded like the completions
        A_out = torch.zeros(c_ids.shape)
        for j, r in enumerate(rows):
            A_out[j, :len(r[3])] = torch.tensor(r[3])
    else:
        A_out = torch.tensor([r[3] for r in rows])
    return p_ids, p_mask, c_ids, c_mask, old, A_out


def _step_ends(tok, token_ids, text: str, separator: str = "\n\n") -> list[int]:
    """Index of the last token of each step of a completion (steps split at `separator`)."""
    ends, pos, t = [], 0, 0
    for step in text.split(separator):
        if not step.strip():
            pos += len(step) + len(separator)
            continue
        target = pos + len(step.rstrip())
        while t < len(token_ids) - 1 and len(tok.decode(list(token_ids[:t + 1]), skip_special_tokens=True)) < target:
            t += 1
        ends.append(t)
        pos += len(step) + len(separator)
    return ends or [max(0, len(token_ids) - 1)]


def _process_advantages(groups, valid, tok):
    """docs/algorithms.md §process from the `prm` verdicts' step scores: A (B, G, T)."""
    import torch

    from ..advantages import ADVANTAGES

    B, G = len(groups), max(len(g.samples) for g in groups)
    T = max(1, max(len(s.token_ids) for g in groups for s in g.samples))
    K = max(1, max(int(s.verdicts["prm"].metrics.get("steps", 0)) for g in groups for s in g.samples))
    r = torch.zeros(B, G, K)
    ends = torch.zeros(B, G, K, dtype=torch.long)
    m = torch.zeros(B, G, K, dtype=torch.bool)
    for b, g in enumerate(groups):
        for i, s in enumerate(g.samples):
            if not valid[b, i]:
                continue
            v = s.verdicts["prm"]
            n = int(v.metrics.get("steps", 0))
            e = _step_ends(tok, s.token_ids, s.text)
            for k in range(min(n, len(e))):
                r[b, i, k], ends[b, i, k], m[b, i, k] = v.metrics[f"step_{k}"], min(e[k], T - 1), True
    return ADVANTAGES.get("process")(r, ends, m, T)


def update_minibatch(train_model, ref, ranks, g, agg, tensors, idx) -> dict[str, float]:
    """Gradients of the clipped objective over the minibatch `idx`, accumulated over micro-batches of similar
    length (`grpo.length_buckets`), each padded only to its own longest row. Each micro-batch's loss is weighed by
    its share of the minibatch's tokens (token-mean losses) or sequences (per-sequence means), so the summed
    gradient equals that of one padded batch. Returns the minibatch's metrics (token-weighted; ratio/max the max)."""
    import torch

    from ..logprobs import length_buckets, token_logprobs, trim_padding
    from ..losses import masked_mean, ppo_clip
    from ..models import autocast

    p_ids, p_mask, c_ids, c_mask, old, A = (t[idx] for t in tensors)
    T = c_mask.sum()
    chunks = length_buckets((p_mask.sum(-1) + c_mask.sum(-1)).tolist(), g.length_buckets)
    metrics: dict[str, float] = {}
    for k, chunk in enumerate(chunks):
        sub = torch.tensor(chunk, dtype=torch.long)
        pi, pm, ci, cm = trim_padding(p_ids[sub], p_mask[sub], c_ids[sub], c_mask[sub])
        tc = ci.shape[1]
        A_sub = A[sub][:, :tc] if A.dim() == 2 else A[sub]
        share = float(cm.sum() / T)  # of the minibatch's tokens
        w = share if agg == "token_mean" else len(chunk) / len(idx)
        with ranks.no_sync(train_model, k < len(chunks) - 1):  # one all-reduce per minibatch, on its last chunk
            with autocast(g.bf16):
                logp, ent = token_logprobs(train_model, pi, pm, ci, cm, temperature=g.temperature or 1.0,
                                           return_entropy=True)
                lref = None
                if ref is not None:
                    with torch.no_grad():
                        lref = token_logprobs(ref, pi, pm, ci, cm, temperature=g.temperature or 1.0)
            out = ppo_clip(logp, old[sub][:, :tc], A_sub, cm, eps_low=g.eps_low, eps_high=g.eps_high, agg=agg,
                           max_len=g.max_tokens, logp_ref=lref, beta=g.beta, kl_estimator=g.kl_estimator)
            (out.loss * w).backward()
        out.metrics["entropy"] = masked_mean(ent.detach(), cm)  # of the policy at the sampled states, per token
        for name, v in out.metrics.items():
            if name == "ratio/max":
                metrics[name] = max(metrics.get(name, v), v)
            else:
                metrics[name] = metrics.get(name, 0.0) + (w if name == "loss/policy" else share) * v
    return metrics
