"""GRPO's batch: verified groups -> padded tensors with advantages -> one minibatch's gradient.

    make_batch(groups, reward, tok, gcfg) -> (GRPOBatch | None, metrics)
        A (n,) per sequence from the group-normalised advantage, or (n, Tc) per token (process supervision,
        docs/algorithms.md §process, from the `prm` verdicts' step scores); masked samples are left out.
    update_minibatch(model, ref, ranks, gcfg, gen, batch) -> metrics
        accumulates the PPO-clip gradient of a minibatch over micro-batches (by length, or within a token budget),
        leaving out the rows whose gradient is exactly zero (`live_rows`: zero advantage on every token, no KL or
        entropy term).

Not here: sampling, verification, the optimiser step or any logging (loop.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..algos.advantages import ADVANTAGES, SHAPING, GroupOptions, per_term, process
from ..config.sections import GenerationConfig, GRPOConfig
from ..models.logprobs import (TokenBatch, length_buckets, pad_rollouts, pad_values, prompt_runs, token_budget_runs,
                               token_logprobs, trim_padding)
from ..algos.losses import POLICY_LOSSES, aggregate, masked_mean
from ..models.load import autocast
from ..types import Group, Status


@dataclass(frozen=True)
class GRPOBatch:
    tokens: TokenBatch
    A: torch.Tensor  # (n,) per sequence, or (n, Tc) per token
    groups: list[Group]  # the kept groups the rows come from
    is_weight: torch.Tensor | None = None  # (n, Tc) or (n, 1): rollout-correction weights (offpolicy.py), or None

    def __len__(self) -> int:
        return len(self.tokens)


def is_void(s, outcome: str) -> bool:
    """An episode that ended on a void turn: its last turn called no tool and the outcome verifier read no answer
    (UNPARSEABLE). Single-turn samples are never void."""
    if not s.turns or s.turns[-1].call:
        return False
    v = s.verdicts.get(outcome)
    return v is not None and v.status is Status.UNPARSEABLE


def make_batch(groups: list[Group], reward, tok, gcfg: GRPOConfig, device=None,
               max_len: int = 0) -> tuple[GRPOBatch | None, dict[str, float]]:
    """Flatten kept groups into padded tensors for the loss: (the batch, or None when nothing is trainable;
    metrics). `max_len` (generation.max_tokens) places the soft overlong penalty (metric reward/overlong)."""
    m: dict[str, float] = {}
    # process supervision reads the PRM's step scores (per token); every other estimator is a group estimator
    estimator = None if gcfg.advantage == "process" else ADVANTAGES.get(gcfg.advantage)
    scores = [[reward.combine(s.verdicts) for s in g.samples] for g in groups]
    if estimator is not None and estimator.scores == "outcome":  # pass@k: the outcome's pass/fail, not the composite
        scores = [[None if s.outcome(reward.outcome) is None else float(s.outcome(reward.outcome)) for s in g.samples]
                  for g in groups]
    R = torch.tensor([[0.0 if x is None else x for x in row] for row in scores], dtype=torch.float32)  # (B, G)
    valid = torch.tensor([[x is not None and len(s.token_ids) > 0 for x, s in zip(row, g.samples)]
                          for row, g in zip(scores, groups)])  # (B, G): masked samples are out of every statistic
    pen = None
    if gcfg.overlong_buffer and (estimator is None or estimator.scores == "reward"):
        lengths = torch.tensor([[len(s.token_ids) for s in g.samples] for g in groups])
        pen = SHAPING.get("soft_overlong")(lengths, max_len=max_len, buffer=min(gcfg.overlong_buffer, max_len),
                                           penalty=gcfg.overlong_penalty)
        R = R + torch.where(valid, pen, 0.0)
        m["reward/overlong"] = pen[valid].mean().item() if valid.any() else 0.0
    if estimator is None:
        valid &= torch.tensor([[not s.verdicts["prm"].masked for s in g.samples] for g in groups])
        A = _process_advantages(groups, valid, tok)  # (B, G, T): per token
    elif gcfg.reward_normalization == "per_term":
        A, valid, per = _per_term_advantages(groups, reward, estimator, gcfg, pen)  # (B, G)
        m.update(per)
    else:
        A = estimator(R, valid, GroupOptions(scale=gcfg.scale_rewards, k=gcfg.pass_k))  # (B, G)
    rows = []
    void = [[is_void(s, reward.outcome) for s in g.samples] for g in groups]
    if any(s.turns for g in groups for s in g.samples):
        m["tools/void"] = sum(map(sum, void)) / max(1, sum(map(len, void)))
    for b, g in enumerate(groups):
        for i, s in enumerate(g.samples):
            if not valid[b, i] or (gcfg.mask_truncated_completions and s.truncated) or \
                    (gcfg.void_turns == "filter" and void[b][i]):
                continue
            a = A[b, i, :len(s.token_ids)].tolist() if A.dim() == 3 else A[b, i].item()
            rows.append((tok(g.prompt)["input_ids"], list(s.token_ids), list(s.logprobs), a, s.loss_mask, s.floors))
    if not rows:
        return None, m
    tokens = pad_rollouts([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], tok.pad_token_id,
                          device=device, loss_masks=[r[4] for r in rows], floors=[r[5] for r in rows])
    if A.dim() == 3:  # per-token advantages (process supervision), padded like the completions
        A_out = pad_values([r[3] for r in rows], tuple(tokens.c_ids.shape))
    else:
        A_out = torch.tensor([r[3] for r in rows])
    return GRPOBatch(tokens, A_out.to(tokens.c_ids.device), groups), m


def _per_term_advantages(groups: list[Group], reward, estimator, gcfg: GRPOConfig, pen: torch.Tensor | None):
    """grpo.reward_normalization=per_term (GDPO; algos/advantages.py `per_term`): each weighted term's advantage
    within its group on the samples it scored, weighted and summed, normalised over the batch (the soft overlong
    penalty, when on, one more term of weight 1). A sample is in the loss when its outcome verdict is not masked
    (a masked format verdict leaves only that term out). Returns (A (B, G), the samples in the loss (B, G), each
    term's mean score, spread within its groups and mean weighted advantage magnitude)."""
    terms = [t for t in reward.terms if t.weight != 0]
    R = torch.tensor([[[0.0 if s.verdicts[t.verifier].masked else s.verdicts[t.verifier].score for t in terms]
                       for s in g.samples] for g in groups], dtype=torch.float32)  # (B, G, K)
    ok = torch.tensor([[[not s.verdicts[t.verifier].masked for t in terms] for s in g.samples] for g in groups])
    weights = torch.tensor([t.weight for t in terms], dtype=torch.float32)
    names = [t.verifier for t in terms]
    if pen is not None:
        R, ok = torch.cat([R, pen.unsqueeze(-1)], -1), torch.cat([ok, torch.ones_like(ok[..., :1])], -1)
        weights, names = torch.cat([weights, torch.ones(1)]), names + ["overlong"]
    sample_valid = torch.tensor([[not s.verdicts[reward.outcome].masked and len(s.token_ids) > 0 for s in g.samples]
                                 for g in groups])  # (B, G)
    A, parts = per_term(R, ok, weights, estimator, GroupOptions(scale="group", k=gcfg.pass_k),
                        sample_valid=sample_valid, batch_norm=gcfg.per_term_batch_norm)
    m = {}
    for k, name in enumerate(names):
        on = ok[..., k] & sample_valid
        if on.any():
            mu = torch.where(on, R[..., k], 0.0).sum(-1, keepdim=True) / on.sum(-1, keepdim=True).clamp(min=1)
            spread = (torch.where(on, (R[..., k] - mu) ** 2, 0.0).sum(-1) / on.sum(-1).clamp(min=1)).sqrt()
            m[f"advantage/term/{name}/mean"] = R[..., k][on].mean().item()
            m[f"advantage/term/{name}/spread"] = spread[on.any(-1)].mean().item()
            m[f"advantage/term/{name}/share"] = parts[..., k][on].abs().mean().item()
    return A, sample_valid, m


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
    return process(r, ends, m, T)


def _loss(gcfg: GRPOConfig, gen: GenerationConfig, logp, logp_old, A, loss_mask, lref, w):
    """The configured objective (grpo.loss_type) on one micro-batch: the clipped surrogate (token ratios or GSPO's)
    under its aggregation, or CISPO."""
    objective = POLICY_LOSSES.get(gcfg.loss_type)
    return objective.fn(logp, logp_old, A, loss_mask, eps_low=gcfg.eps_low, eps_high=gcfg.eps_high,
                        ratio_level=gcfg.ratio_level, agg=objective.agg, max_len=gen.max_tokens, logp_ref=lref,
                        beta=gcfg.beta, kl_estimator=gcfg.kl_estimator, is_weight=w)


@dataclass(frozen=True)
class MicroBatch:
    """One micro-batch of a minibatch: its rows (`sub`, indices into the minibatch), trimmed to its own longest
    row, its loss mask, and its share of the minibatch's trained tokens (what a token-mean loss is weighed by)."""
    sub: torch.Tensor  # (n,)
    p_ids: torch.Tensor  # (n, tp)
    p_mask: torch.Tensor
    c_ids: torch.Tensor  # (n, tc)
    c_mask: torch.Tensor
    loss_mask: torch.Tensor  # (n, tc) c_mask less observation tokens: the loss never sees those
    share: float
    last: bool  # the minibatch's last: where DDP all-reduces
    floor: torch.Tensor | None = None  # (n, tc) kept-set floors (logprobs.TokenBatch.floor), None: nothing cut

    @property
    def padded(self) -> int:
        """The tokens its pass holds, padding included: rows x (longest prompt + longest completion)."""
        return len(self.sub) * (self.p_ids.shape[1] + self.c_ids.shape[1])


def pass_metrics(passes: list[int]) -> dict[str, float]:
    """A minibatch's passes from the padded tokens of each (MicroBatch.padded): how many, and the largest."""
    return {"train/passes": float(len(passes)), "train/largest_pass": float(max(passes, default=0))}


def live_rows(A: torch.Tensor, gcfg: GRPOConfig, entropy_coef: float = 0.0) -> torch.Tensor | None:
    """The rows of a minibatch whose gradient can be non-zero, (n,) bool, or None when every row's can. A row whose
    advantage is zero on every token has a zero clipped surrogate (and CISPO term) and a zero gradient, unless the
    KL to the reference (beta > 0) or the entropy bonus reaches it (grpo.skip_zero_advantage).
    A: (n,) per sequence or (n, Tc) per token."""
    if not gcfg.skip_zero_advantage or gcfg.beta > 0 or entropy_coef:
        return None
    live = A != 0 if A.dim() == 1 else (A != 0).any(-1)  # (n,)
    return None if bool(live.all()) else live


def micro_batches(mb: TokenBatch, buckets: int, share_prompts: bool = False, live: torch.Tensor | None = None,
                  budget: int = 0) -> list[MicroBatch]:
    """The minibatch `mb` cut into up to `buckets` micro-batches of similar length (logprobs.length_buckets), each
    padded only to its own longest; with `share_prompts` a group's rows stay in one (its prompt runs once there).
    `live` (n,) bool: only those rows are cut into micro-batches, each still weighed by its share of every row's
    tokens (`live_rows`); none at all when no row is live. Fewer live rows run as fewer micro-batches, each of about
    the rows one of the whole minibatch's holds (n / buckets, a group kept whole): the same memory, larger products.
    `budget` > 0 (grpo.micro_batch_tokens) cuts by size instead: each micro-batch at most `budget` padded tokens,
    rows x its longest prompt + completion (logprobs.token_budget_runs); `buckets` is then not read."""
    rows = torch.arange(len(mb)) if live is None else live.nonzero().squeeze(-1)  # (r,) the rows that run
    p_len, c_len = mb.p_mask.sum(-1)[rows].tolist(), mb.c_mask.sum(-1)[rows].tolist()
    groups = prompt_runs(mb.p_ids, mb.p_mask)[1][rows].tolist() if share_prompts else None
    if budget:
        chunks = token_budget_runs(p_len, c_len, budget, groups=groups)
    else:
        cap = -(-len(mb) // max(1, buckets))  # rows in a micro-batch of the whole minibatch
        lengths = [p + c for p, c in zip(p_len, c_len)]
        chunks = length_buckets(lengths, -(-len(rows) // cap), groups=groups)  # as few as hold the rows that run
    return cut(mb, [rows[torch.tensor(chunk, dtype=torch.long)] for chunk in chunks])


def cut(mb: TokenBatch, subs: list[torch.Tensor]) -> list[MicroBatch]:
    """The micro-batches of `mb` whose rows are `subs` (each (n,), indices into `mb`), each trimmed to its own
    longest row and weighed by its share of all of `mb`'s trained tokens."""
    T = mb.loss_mask.sum().clamp(min=1)
    out = []
    for k, sub in enumerate(subs):
        p_ids, p_mask, c_ids, c_mask = trim_padding(mb.p_ids[sub], mb.p_mask[sub], mb.c_ids[sub], mb.c_mask[sub])
        loss_mask = mb.loss_mask[sub][:, :c_ids.shape[1]]
        floor = None if mb.floor is None else mb.floor[sub][:, :c_ids.shape[1]]
        out.append(MicroBatch(sub, p_ids, p_mask, c_ids, c_mask, loss_mask, float(loss_mask.sum() / T),
                              k == len(subs) - 1, floor))
    return out


def update_minibatch(train_model, ref, ranks, gcfg: GRPOConfig, gen: GenerationConfig, batch: GRPOBatch,
                     idx: torch.Tensor, entropy_coef: float = 0.0, share_prompts: bool = False) -> dict[str, float]:
    """Gradients of the clipped objective over the minibatch `idx`, accumulated over micro-batches of similar
    length (`grpo.length_buckets`, or each within `grpo.micro_batch_tokens`), each padded only to its own longest
    row. Each micro-batch's loss is weighed by its share of the minibatch's tokens (token-mean losses) or sequences
    (per-sequence means), so the summed gradient equals that of one padded batch. With `share_prompts` a group's rows
    stay in one micro-batch and its prompt runs once there (logprobs.token_logprobs). Returns the minibatch's metrics
    (token-weighted; ratio/max the max)."""
    agg = POLICY_LOSSES.get(gcfg.loss_type).agg
    mb, A = batch.tokens[idx], batch.A[idx]
    W = batch.is_weight[idx] if batch.is_weight is not None else None
    live = live_rows(A, gcfg, entropy_coef)
    metrics: dict[str, float] = {}
    ran = 0.0  # the share of the minibatch's tokens in the micro-batches that ran
    padded = []  # each pass's padded tokens
    for m in micro_batches(mb, gcfg.length_buckets, share_prompts, live, gcfg.micro_batch_tokens):
        padded.append(m.padded)
        sub, p_ids, p_mask, c_ids, c_mask, loss_mask = m.sub, m.p_ids, m.p_mask, m.c_ids, m.c_mask, m.loss_mask
        tc = c_ids.shape[1]
        A_sub = A[sub][:, :tc] if A.dim() == 2 else A[sub]
        share = m.share  # of the minibatch's trained tokens
        w = share if agg == "token_mean" else len(sub) / len(idx)
        with ranks.no_sync(train_model, not m.last):  # one all-reduce per minibatch, on its last micro-batch
            with autocast(gcfg.bf16):
                logp, ent = token_logprobs(train_model, p_ids, p_mask, c_ids, c_mask, temperature=gen.temperature or 1.0,
                                           return_entropy=True, share_prompts=share_prompts, floor=m.floor)
                lref = None
                if ref is not None:
                    with torch.no_grad():
                        lref = token_logprobs(ref, p_ids, p_mask, c_ids, c_mask, temperature=gen.temperature or 1.0,
                                              share_prompts=share_prompts)
            W_sub = None if W is None else W[sub][:, :tc]  # (n, tc) token weights, or (n, 1) sequence weights
            out = _loss(gcfg, gen, logp, mb.logp_old[sub][:, :tc], A_sub, loss_mask, lref, W_sub)
            loss = out.loss
            if entropy_coef:  # the bonus as a loss: -coef * H, aggregated like the policy term
                loss = loss - entropy_coef * aggregate(ent, loss_mask, agg, gen.max_tokens)
            (loss * w).backward()
        out.metrics["entropy"] = masked_mean(ent.detach(), loss_mask)  # of the policy at the sampled states, a token
        ran += share
        for name, v in out.metrics.items():
            if name == "ratio/max":
                metrics[name] = max(metrics.get(name, v), v)
            else:
                metrics[name] = metrics.get(name, 0.0) + (w if name == "loss/policy" else share) * v
    if live is not None and ran > 0:  # averages over the rows that ran (the loss: over all, a row left out adds 0)
        for name in metrics:
            if name not in ("loss/policy", "ratio/max"):
                metrics[name] /= ran
    if live is not None and not live.any():
        metrics["loss/policy"] = 0.0  # no row ran: every row's loss is exactly zero
    metrics["train/zero_advantage_rows"] = 0.0 if live is None else 1.0 - live.float().mean().item()
    return {**metrics, **pass_metrics(padded)}
