"""Response-only token log-probabilities from a causal LM (docs/algorithms.md §logprobs).

log pi(y|x) = sum_t log pi(y_t | x, y_<t), over response tokens only: the prompt and the
padding are masked. Inputs follow the rollout layout: the prompt left-padded, the
completion right-padded, concatenated.

    prompt_ids, prompt_mask:         (B, Tp)  left-padded
    completion_ids, completion_mask: (B, Tc)  right-padded
    -> per-token log-probs (B, Tc), zero where completion_mask is 0

Only the last Tc+1 positions' logits are materialised (`logits_to_keep`), and the
log-softmax is computed as gather - logsumexp block by block (algos/vocab_blocks.py), so memory stays
(B, Tc, V) at most: the logits themselves.
`TokenBatch` / `pad_rollouts` is the one tokenise-and-pad path of the trainers: prompts, completions
and their sampling log-probs. `trim_padding` and `length_buckets` cut a padded batch into
micro-batches of similar length (`token_budget_runs`: each within a padded-token budget).
Not here: any loss.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Sequence

import torch

from ..algos.vocab_blocks import sampled_logprobs


def completion_logits(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, completion_ids: torch.Tensor,
                      completion_mask: torch.Tensor, *, share_prompts: bool = False) -> torch.Tensor:
    """The logits that predict each completion token, (B, Tc, V) in the model's dtype: position t's row predicts
    completion token t. share_prompts: see `token_logprobs`."""
    if prompt_ids.shape[0] != completion_ids.shape[0]:
        raise ValueError(f"prompt batch {prompt_ids.shape[0]} != completion batch {completion_ids.shape[0]}")
    logits = _shared_prompt_logits(model, prompt_ids, prompt_mask, completion_ids, completion_mask) \
        if share_prompts else None
    if logits is None:
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)  # (B, Tp + Tc)
        attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
        position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)  # left padding does not shift positions
        Tc = completion_ids.shape[1]
        out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                    logits_to_keep=Tc + 1, use_cache=False)
        logits = out.logits[:, :-1, :]  # (B, Tc, V): position t predicts completion token t
    return logits


def token_logprobs(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, completion_ids: torch.Tensor,
                   completion_mask: torch.Tensor, *, temperature: float = 1.0, return_entropy: bool = False,
                   share_prompts: bool = False, floor: torch.Tensor | None = None
                   ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """log pi(y_t | x, y_<t) for each completion token, (B, Tc); optionally also the entropy (B, Tc).

    floor (B, Tc): where top-p / top-k cut the sampling distribution, each token's log-prob is renormalised over its
    kept set, the tokens whose logit / T is at least the floor (and the sampled one: vocab_blocks.sampled_logprobs),
    as the engine drew it; the entropy stays the whole distribution's. None (or all -inf): the whole softmax.

    share_prompts: rows with the same prompt (a group's samples) run it through the model once; its keys and values
    are copied to each of its rows and the completions run after them (`_shared_prompt_logits`). The same values
    and gradients up to float noise, for about (unique prompts x Tp + B x Tc) tokens instead of B x (Tp + Tc)."""
    logits = completion_logits(model, prompt_ids, prompt_mask, completion_ids, completion_mask,
                               share_prompts=share_prompts)  # (B, Tc, V) in the model's dtype
    # gather - logsumexp, and H = logsumexp - E_p[logit], block by block over the vocabulary in float32
    logp, entropy = sampled_logprobs(logits, completion_ids, temperature, with_entropy=return_entropy, floor=floor)
    cm = completion_mask.to(logp.dtype)
    logp = logp * cm
    if not return_entropy:
        return logp
    return logp, entropy * cm


def prompt_runs(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(first, inverse): the first row of each distinct prompt (U,), and each row's distinct prompt (B,)."""
    _, inverse = torch.unique(torch.cat([prompt_ids, prompt_mask.to(prompt_ids.dtype)], dim=1), dim=0,
                              return_inverse=True)
    first = torch.full((int(inverse.max()) + 1,), len(inverse), dtype=torch.long)
    first = first.scatter_reduce(0, inverse, torch.arange(len(inverse)), reduce="amin")
    return first, inverse


def _checkpointing(model) -> bool:
    """Whether activation (gradient) checkpointing is on: transformers then runs no cache in training."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft wraps the model
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):  # the first from transformers 5.x
        if hasattr(type(inner), name):
            return bool(getattr(inner, name))
    return False


def _shared_prompt_logits(model, prompt_ids, prompt_mask, completion_ids, completion_mask) -> torch.Tensor | None:
    """The (B, Tc, V) logits predicting each completion token, each distinct prompt run once: its forward pass
    (U rows) keeps its keys and values, which are gathered to the B rows (autograd carries the gradient of every row
    back to its prompt's one pass), and the completions but their last token run after them. The logit at the
    prompt's last position predicts completion token 0. None where there is nothing to share (every prompt
    distinct) or the model cannot run so (DDP-wrapped: one forward per backward; gradient checkpointing: no cache
    in training; a cache that is not plain full attention), and the caller runs the plain pass."""
    from transformers import DynamicCache

    from .cache import cache_argument, reusable

    first, inverse = prompt_runs(prompt_ids, prompt_mask)
    if len(first) == len(inverse) or isinstance(model, torch.nn.parallel.DistributedDataParallel) \
            or _checkpointing(model) or not reusable(model):
        return None
    kw = cache_argument(model)
    Tp, Tc = prompt_ids.shape[1], completion_ids.shape[1]
    mask = torch.cat([prompt_mask, completion_mask], dim=1)  # (B, Tp + Tc)
    pos = (mask.long().cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache(config=model.config)
    head = model(input_ids=prompt_ids[first], attention_mask=prompt_mask[first], position_ids=pos[first, :Tp],
                 use_cache=True, logits_to_keep=1, **{kw: cache}).logits  # (U, 1, V)
    if Tc == 1:
        return head[inverse]
    cache.batch_select_indices(inverse)  # (U, ...) -> (B, ...): each row its prompt's keys and values
    tail = model(input_ids=completion_ids[:, :-1], attention_mask=mask[:, :-1], position_ids=pos[:, Tp:-1],
                 use_cache=True, **{kw: cache}).logits  # (B, Tc - 1, V)
    return torch.cat([head[inverse], tail], dim=1)


def sequence_logprob(per_token: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """log pi(y|x) = sum of response-token log-probs. (B, Tc) -> (B,)"""
    return (per_token * completion_mask.to(per_token.dtype)).sum(-1)


def pad_completions(seqs: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token-id lists into (B, Tc) ids and mask."""
    Tc = max((len(s) for s in seqs), default=0)
    ids = torch.full((len(seqs), max(Tc, 1)), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, :len(s)] = 1
    return ids, mask


def pad_prompts(seqs: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad token-id lists into (B, Tp) ids and mask."""
    Tp = max((len(s) for s in seqs), default=0)
    ids = torch.full((len(seqs), max(Tp, 1)), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, s in enumerate(seqs):
        if s:
            ids[i, -len(s):] = torch.tensor(s, dtype=torch.long)
            mask[i, -len(s):] = 1
    return ids, mask


def pad_values(seqs: list[list[float]], shape: tuple[int, int]) -> torch.Tensor:
    """Right-pad float lists (per-token log-probs or advantages) into a (B, Tc) tensor of zeros."""
    out = torch.zeros(shape)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = torch.tensor(s, dtype=out.dtype)
    return out


def pad_floors(floors: Sequence[Sequence[float]], shape: tuple[int, int]) -> torch.Tensor | None:
    """Rows' kept-set floors (types.Sample.floors; empty: nothing cut) as a (B, Tc) tensor, -inf on every other
    position; None when no row has any (the whole softmax everywhere)."""
    if not any(floors):
        return None
    out = torch.full(shape, float("-inf"))
    for i, f in enumerate(floors):
        out[i, :len(f)] = torch.tensor(list(f), dtype=out.dtype)
    return out


@dataclass(frozen=True)
class TokenBatch:
    """Rollouts as tensors: the prompt left-padded, the completion right-padded, and the log-probs the
    sampling policy gave each completion token (pi_old), zero on padding."""
    p_ids: torch.Tensor  # (B, Tp)
    p_mask: torch.Tensor  # (B, Tp)
    c_ids: torch.Tensor  # (B, Tc)
    c_mask: torch.Tensor  # (B, Tc)  the completion's tokens (attended to)
    logp_old: torch.Tensor  # (B, Tc)
    loss_mask: torch.Tensor | None = None  # (B, Tc)  the tokens the loss is taken on: c_mask (the default), less a
    # multi-turn episode's observations
    floor: torch.Tensor | None = None  # (B, Tc)  each token's kept-set floor where top-p / top-k cut its sampling
    # distribution (types.Sample.floors; -inf where nothing was cut); None: nothing cut anywhere

    def __post_init__(self) -> None:
        if self.loss_mask is None:
            object.__setattr__(self, "loss_mask", self.c_mask)

    def __len__(self) -> int:
        return self.c_ids.shape[0]

    def __getitem__(self, idx) -> "TokenBatch":
        return TokenBatch(*(None if (t := getattr(self, f.name)) is None else t[idx] for f in fields(self)))

    def to(self, device) -> "TokenBatch":
        return TokenBatch(*(None if (t := getattr(self, f.name)) is None else t.to(device) for f in fields(self)))


def pad_rollouts(prompt_ids: list[list[int]], completion_ids: list[list[int]], logp_old: list[list[float]],
                 pad_id: int, device=None, loss_masks: list[Sequence[int]] | None = None,
                 floors: list[Sequence[float]] | None = None) -> TokenBatch:
    """Token-id lists (and the sampling log-probs of the completions) -> a padded TokenBatch (on `device`: the
    model's, so that a GPU run never mixes devices). `loss_masks`: per row, 0 on tokens the loss must not see (a
    multi-turn episode's observations; an empty mask: every token). `floors`: per row, its tokens' kept-set floors
    (types.Sample.floors; empty: nothing cut), -inf elsewhere; no row with any: the batch's floor is None."""
    p_ids, p_mask = pad_prompts(prompt_ids, pad_id)
    c_ids, c_mask = pad_completions(completion_ids, pad_id)
    loss = c_mask
    if loss_masks is not None and any(0 in m for m in loss_masks):
        rows = [list(m) if m else [1] * len(c) for m, c in zip(loss_masks, completion_ids)]
        loss = pad_values(rows, tuple(c_ids.shape)).to(c_mask.dtype) * c_mask
    floor = pad_floors(floors, tuple(c_ids.shape)) if floors is not None else None
    b = TokenBatch(p_ids, p_mask, c_ids, c_mask, pad_values(logp_old, tuple(c_ids.shape)), loss, floor)
    return b if device is None else b.to(device)


def trim_padding(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, completion_ids: torch.Tensor,
                 completion_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Drop the columns that are padding in every row: the leading prompt columns (left-padded) and the
    trailing completion columns (right-padded). The log-probs of the kept tokens do not change."""
    tp = max(1, int(prompt_mask.sum(-1).max()))
    tc = max(1, int(completion_mask.sum(-1).max()))
    Tp = prompt_ids.shape[1]
    return prompt_ids[:, Tp - tp:], prompt_mask[:, Tp - tp:], completion_ids[:, :tc], completion_mask[:, :tc]


def length_buckets(lengths: list[int], buckets: int, groups: list[int] | None = None) -> list[list[int]]:
    """Positions 0..n-1 sorted by length and cut into up to `buckets` runs of equal count: micro-batches whose
    rows are of similar length, so padding each to its own longest wastes little. With `groups` (each position's
    group) a group is never split: groups sorted by their longest row fill runs of about equal count."""
    if not lengths:
        return []
    if groups is None:
        order = sorted(range(len(lengths)), key=lengths.__getitem__)
        size = -(-len(order) // max(1, min(buckets, len(order))))
        return [order[i:i + size] for i in range(0, len(order), size)]
    members = _members(groups)
    size = -(-len(lengths) // max(1, min(buckets, len(members))))
    runs, run = [], []
    for m in sorted(members, key=lambda m: max(lengths[i] for i in m)):
        run += m
        if len(run) >= size:
            runs.append(run)
            run = []
    return runs + ([run] if run else [])


def token_budget_runs(prompt_lengths: list[int], completion_lengths: list[int], budget: int,
                      groups: list[int] | None = None) -> list[list[int]]:
    """Positions 0..n-1 sorted by length (prompt + completion) and cut into runs whose padded size, rows x (the
    run's longest prompt + its longest completion, as `trim_padding` pads it), is at most `budget` tokens:
    micro-batches bounded by what they hold rather than by a count (verl's dynamic batch size). Each run takes the
    next rows in length order while they fit, so short rows share a pass and long ones get few companions. With
    `groups` (each position's group) a group is never split: groups sorted by their longest row are the units. A
    unit that alone exceeds the budget runs alone (a pass holds at least one)."""
    units = [[i] for i in range(len(prompt_lengths))] if groups is None else _members(groups)
    runs: list[list[int]] = []
    run: list[int] = []
    tp = tc = 0  # the run's longest prompt and completion
    for u in sorted(units, key=lambda u: max(prompt_lengths[i] + completion_lengths[i] for i in u)):
        up, uc = max(prompt_lengths[i] for i in u), max(completion_lengths[i] for i in u)
        if run and (len(run) + len(u)) * (max(tp, up) + max(tc, uc)) > budget:
            runs.append(run)
            run, tp, tc = [], 0, 0
        run, tp, tc = run + u, max(tp, up), max(tc, uc)
    return runs + ([run] if run else [])


def _members(groups: list[int]) -> list[list[int]]:
    """The positions of each group, groups in order of first appearance: [0, 1, 0] -> [[0, 2], [1]]."""
    members: dict[int, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    return list(members.values())
