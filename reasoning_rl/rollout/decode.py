"""A KV-cache sampling loop that stops computing a row the moment it finishes.

`transformers.generate` keeps every row of the batch in each forward pass until the last
row ends (a finished row is fed padding). On RL rollouts the lengths spread widely (a
4-token answer beside a 28-token worked solution in the same group), so most of that
compute is spent on finished rows. Here, after each step the rows that emitted EOS are
dropped from the batch and from the cache (`Cache.batch_select_indices`), so a step costs
what its live rows cost.

    sample(model, input_ids, attention_mask, max_tokens, eos_id, temperature, top_p, top_k, repeats)
      input_ids, attention_mask: (P, Tp) left-padded prompts; eos_id: one id or several (a chat model's
      end-of-turn beside its end-of-text: the first that a row emits ends it); repeats: samples per prompt
      -> ids (B, max_tokens) (pad = the first eos id after the end), logp (B, max_tokens), lengths (B,),
         B = P * repeats, prompt p's samples in rows p*repeats ... p*repeats + repeats - 1

A group's samples share their prompt, so the prompt is run through the model once and its cache
copied `repeats` times (`Cache.batch_repeat_interleave`): on a real model the prompt's forward pass is
most of a short rollout's compute, and this divides it by the group size. With `share`, a prefix every
prompt of the batch begins with (a chat template's system prompt, a task's instructions: `shared_prefix`, at least
MIN_SHARED tokens) is run once, for one row, its cache copied to every prompt, and only the rest of each prompt
runs after it: each row's positions are then [prefix] [padding] [its own tokens], the padding masked
out and the positions counted over real tokens only, so every token sees the same keys at the same positions as
in one left-padded pass (logits equal up to float rounding).

logp is the log-probability of each sampled token under the distribution it was drawn from: log softmax(logits / T)
over the whole vocabulary, or, with top-p / top-k truncation, renormalised over the kept set (the tokens the draw
could pick). `sample_kept` also returns each token's `floor`: a value of logits / T between its kept set's smallest and
the largest cut (`kept_floor`; -inf where nothing was cut), which rebuilds the set from recomputed logits
(models/logprobs.py; docs/algorithms.md §kept-set).
Greedy (T = 0) takes the argmax and the raw log-softmax.
Sampling draws from torch's global generator, like `generate`, so a seeded run repeats; by default with
`torch.multinomial`, as `generate` does (the same draws), or with another `draw` (cpu_kernels.py: one uniform
per row instead of one exponential per vocabulary entry).

A multi-turn episode's next turn continues its own cache (`continue_cache`, `sample_kept`): the caller keeps
each row's cache at the row's end (its keys and values over the tokens fed: the input and every sampled token but
the last) and hands back, next turn, the part still valid as a left-padded batch with its mask, so only the new
tokens (the last sampled one, the observation) are run through the model.

Stop strings (`stop_texts`): a row ends at the token whose decoding completes one, checked on its last few tokens each
step. Not here: beam search,
speculative decoding, a shared prefix's keys read once per step for all the rows that share it (each row holds
its copy).
"""
from __future__ import annotations

import torch

from ..models.cache import cache_argument, reusable


def truncate(logits: torch.Tensor, top_p: float, top_k: int) -> torch.Tensor:
    """Logits with everything outside the top-k / top-p nucleus set to -inf. (b, V) -> (b, V)"""
    if top_k and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (b, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        outside = probs.cumsum(-1) - probs > top_p  # mass before this token already exceeds top_p; the first stays
        sorted_logits = sorted_logits.masked_fill(outside, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)
    return logits


RowCache = list  # one row's cache: per layer (keys, values), each (H, L, D) over the row's L real positions


def continue_cache(model, rows: list[RowCache | None], keep: list[int]):
    """A batch cache from rows' own caches, each cut to its first keep[i] positions and left-padded to the longest:
    (cache, mask (B, M)); a row with None or keep 0 is all padding. None when no row keeps anything."""
    from transformers import DynamicCache

    M = max(keep, default=0)
    if M == 0:
        return None
    some = next(r for r, k in zip(rows, keep) if r is not None and k > 0)
    cache = DynamicCache(config=model.config)
    mask = torch.zeros(len(rows), M, dtype=torch.long, device=some[0][0].device)
    for i, k in enumerate(keep):
        mask[i, M - k:] = 1
    for layer in range(len(some)):
        parts = []
        for which in (0, 1):  # keys, values
            like = some[layer][which]  # (H, L, D)
            batch = like.new_zeros(len(rows), like.shape[0], M, like.shape[2])  # (B, H, M, D)
            for i, (r, k) in enumerate(zip(rows, keep)):
                if r is not None and k > 0:
                    batch[i, :, M - k:] = r[layer][which][:, :k]
            parts.append(batch)
        cache.update(parts[0], parts[1], layer)
    return cache, mask


def _row_caches(cache, mask: torch.Tensor, rows: torch.Tensor) -> list[RowCache]:
    """Rows `rows` of a batch cache, each over its real positions (where mask is 1: after left padding, and around
    the padding between a shared prefix and the row's own tokens), copied out."""
    out = []
    for j in rows.tolist():
        real = mask[j].nonzero().squeeze(-1)  # (n,)
        out.append([(x.keys[j].index_select(1, real), x.values[j].index_select(1, real)) if len(real) else None
                    for x in cache.layers])
    return out


MIN_SHARED = 16  # a prefix every prompt of a batch shares is run once from this many tokens (sample_kept's share)


def shared_prefix(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> int:
    """How many leading real tokens every row of a left-padded batch has in common, at most the shortest row's
    length - 1 (each row keeps a token of its own, the one its next token's logits come from); 0 for one row or
    rows not left-padded. input_ids, attention_mask: (P, T)."""
    P, T = input_ids.shape
    lengths = attention_mask.long().sum(-1)  # (P,)
    n = int(lengths.min()) - 1 if P > 1 else 0
    if n < 1 or not bool((attention_mask[:, 1:] >= attention_mask[:, :-1]).all()):  # padding not all on the left
        return 0
    cols = (T - lengths)[:, None] + torch.arange(n, device=input_ids.device)  # (P, n): each row's first n tokens
    tokens = input_ids.gather(1, cols)  # (P, n)
    differs = (tokens != tokens[:1]).any(0)  # (n,)
    return int(differs.nonzero()[0, 0]) if bool(differs.any()) else n


def run_once(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> int:
    """The tokens `share` runs once for all of a left-padded batch's prompts: `shared_prefix`, where it is at least
    MIN_SHARED, else 0."""
    c = shared_prefix(input_ids, attention_mask)
    return c if c >= MIN_SHARED else 0


def _run_shared_prefix(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, cache, kw: str
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """Where the left-padded prompts (P, T) all begin with the same MIN_SHARED tokens or more, run those once for
    one row into `cache` and copy it to every prompt: -> each prompt's rest (P, S), right-aligned, and the mask over
    the cache and the rest (P, c + S; what precedes a row's rest is masked out). Else the prompts and their mask as
    they came, the cache untouched."""
    c = run_once(input_ids, attention_mask)
    if not c:
        return input_ids, attention_mask
    (P, T), dev = input_ids.shape, input_ids.device
    rest = attention_mask.long().sum(-1) - c  # (P,) each prompt's tokens after the prefix
    S, r0 = int(rest.max()), int(rest[0])
    model(input_ids=input_ids[:1, T - c - r0:T - r0], position_ids=torch.arange(c, device=dev)[None], use_cache=True,
          logits_to_keep=1, **{kw: cache})  # (1, c): row 0's prefix, no padding in it
    cache.batch_repeat_interleave(P)
    mine = (torch.arange(S, device=dev) >= S - rest[:, None]).to(attention_mask.dtype)  # (P, S)
    return input_ids[:, T - S:], torch.cat([mine.new_ones(P, c), mine], dim=1)


def _completes(tokenizer, tails: torch.Tensor, stop_texts) -> torch.Tensor:
    """(b,) whether each row's last token completes one of `stop_texts`: the string is in the row's last tokens'
    text and was not in it before that token. tails (b, w): each row's last w sampled ids."""
    now = tokenizer.batch_decode(tails.tolist(), skip_special_tokens=False)
    before = tokenizer.batch_decode(tails[:, :-1].tolist(), skip_special_tokens=False) if tails.shape[1] > 1 else \
        [""] * len(now)
    return torch.tensor([any(s in a and s not in b for s in stop_texts) for a, b in zip(now, before)],
                        device=tails.device)


def kept_floor(truncated: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """The kept set's floor of each row (b,) from its truncated logits and the logits before (b, V): halfway between
    the smallest logit kept and the largest cut, so that a trainer's recomputed logits, a float rounding away from
    these, rebuild the same set (a token moves across only if the rounding exceeds half that gap); -inf where
    nothing was cut."""
    cut = torch.isinf(truncated) & ~torch.isinf(logits)
    low = truncated.masked_fill(torch.isinf(truncated), float("inf")).amin(-1)  # the smallest kept
    high = logits.masked_fill(~cut, float("-inf")).amax(-1)  # the largest cut
    return torch.where(cut.any(-1), (low + high) / 2, torch.full_like(low, float("-inf")))


def truncates(top_p: float, top_k: int) -> bool:
    return top_p < 1.0 or bool(top_k)


def _next_token(logits: torch.Tensor, temperature: float, top_p: float, top_k: int, draw
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """logits (b, V) -> the next token of each row (b,), the log-probs recorded (b, V): log softmax(logits / T), over
    the kept set where top-p / top-k truncate (-inf outside it), and the kept set's floor (b,) (None: no truncation;
    greedy at T = 0: the argmax and the raw log-softmax)."""
    if temperature == 0:
        return logits.argmax(-1), torch.log_softmax(logits, -1), None
    if temperature != 1.0:
        logits = logits / temperature
    if not truncates(top_p, top_k):
        lp = torch.log_softmax(logits, -1)
        if draw is not None:  # the draw takes weights in proportion: exp(lp)
            return draw(lp.exp()), lp, None  # one pass over the logits in place of softmax's three
        return torch.multinomial(torch.softmax(logits, -1), 1).squeeze(-1), lp, None  # as `generate` draws
    kept = truncate(logits, top_p, top_k)
    lp = torch.log_softmax(kept, -1)  # the distribution the draw is from
    probs = torch.softmax(kept, -1)  # torch.multinomial on these, as `generate` draws
    return (torch.multinomial(probs, 1).squeeze(-1) if draw is None else draw(probs)), lp, kept_floor(kept, logits)


def sample(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, max_tokens: int, eos_id,
           temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0, repeats: int = 1, draw=None,
           share: bool = False, stop_texts=(), tokenizer=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    ids, logp, lengths, _, _ = sample_kept(model, input_ids, attention_mask, max_tokens, eos_id, temperature, top_p,
                                           top_k, repeats, draw=draw, share=share, stop_texts=stop_texts,
                                           tokenizer=tokenizer)
    return ids, logp, lengths


def cut_at_stop(text: str, stop_texts) -> tuple[str, bool]:
    """`text` before the earliest of `stop_texts` it holds, and whether it held one (a row the decode loop ended at
    a stop string: its ids keep the token that completed it, its text does not)."""
    at = min((i for i in (text.find(s) for s in stop_texts if s) if i >= 0), default=-1)
    return (text[:at], True) if at >= 0 else (text, False)


@torch.no_grad()
def sample_kept(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, max_tokens: int, eos_id,
                temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0, repeats: int = 1, past=None,
                keep: bool = False, draw=None, share: bool = False, stop_texts=(), tokenizer=None):
    """`sample`, continuing `past` (a `continue_cache` result: the input follows it) when given, and with `keep`
    each row's cache at its end (`RowCache`: the input's real positions and every sampled token but the last);
    -> ids, logp, lengths, caches (None without keep), floors (B, max_tokens): each token's kept-set floor (the
    module's docstring; None where top-p / top-k cut nothing). `draw`: probs (b, V) -> (b,) token ids, in place of
    `torch.multinomial` (cpu_kernels.draw). `share`: a prefix all the prompts begin with runs once (the module's
    docstring; not with `past`, and only where every layer's cache is plain full attention). `stop_texts` (with the
    `tokenizer`): a row also ends at the token that completes one of these strings in its sampled text (kept, as
    EOS is; a multi-turn episode's tool call closing)."""
    from transformers import DynamicCache

    B, dev = input_ids.shape[0] * repeats, input_ids.device
    eos = torch.tensor([eos_id] if isinstance(eos_id, int) else list(eos_id), dtype=torch.long, device=dev)
    ids = torch.full((B, max_tokens), int(eos[0]), dtype=torch.long, device=dev)  # (B, max_tokens)
    logp = torch.zeros(B, max_tokens, device=dev)
    lengths = torch.full((B,), max_tokens, dtype=torch.long, device=dev)
    floors = torch.full((B, max_tokens), float("-inf"), device=dev) if temperature and truncates(top_p, top_k) \
        else None
    alive = torch.arange(B, device=dev)  # rows of the original batch still generating
    kept: list = [None] * B
    if past is not None:  # the rows' caches so far, then this input: (B, M + Tp)
        cache, mask = past[0], torch.cat([past[1].to(attention_mask.dtype), attention_mask], dim=1)
    else:
        cache, mask = DynamicCache(config=model.config), attention_mask
    kw = cache_argument(model)
    if share and past is None and reusable(model):  # a prefix all the prompts begin with, run once (if any)
        input_ids, mask = _run_shared_prefix(model, input_ids, attention_mask, cache, kw)
    from . import fused_step, kv_buffer

    step = fused_step.active(model)  # cpu_decode's fifth kernel: the decode steps as fused operations, or None
    if kv_buffer.active():  # cpu_decode's fourth kernel: room for every step's keys and values, kept from the start
        cache = kv_buffer.buffered(cache, max_tokens)
    pos = (mask.long().cumsum(-1) - 1)[:, mask.shape[1] - input_ids.shape[1]:]  # (P, Tp): padding does not shift
    out = model(input_ids=input_ids, attention_mask=mask, position_ids=pos.clamp(min=0), use_cache=True,
                logits_to_keep=1, **{kw: cache})
    logits = out.logits[:, -1, :]  # (P, V)
    pos = pos[:, -1]  # (P,) position of each live row's last token
    if repeats > 1:  # every prompt's cache, mask and position, copied for each of its samples: (P, .) -> (B, .)
        cache.batch_repeat_interleave(repeats)
        logits, mask, pos = (x.repeat_interleave(repeats, dim=0) for x in (logits, mask, pos))
    window = max((len(s) for s in stop_texts), default=0) + 1  # tokens enough to hold a stop string (>= 1 char each)
    for t in range(max_tokens):
        nxt, lp, floor = _next_token(logits.float(), temperature, top_p, top_k, draw)  # (b,), (b, V), (b,)
        ids[alive, t] = nxt
        logp[alive, t] = lp.gather(-1, nxt.unsqueeze(-1)).squeeze(-1)
        if floors is not None:
            floors[alive, t] = floor
        done = torch.isin(nxt, eos)
        if stop_texts:
            done |= _completes(tokenizer, ids[alive, max(0, t + 1 - window):t + 1], stop_texts)
        lengths[alive[done]] = t + 1
        if t == max_tokens - 1:
            break
        if done.any():
            if keep:
                for j, c in zip(alive[done].tolist(), _row_caches(cache, mask, done.nonzero().squeeze(-1))):
                    kept[j] = c
            live = (~done).nonzero().squeeze(-1)
            if live.numel() == 0:
                return ids, logp, lengths, (kept if keep else None), floors
            cache.batch_select_indices(live)
            alive, nxt, mask, pos = alive[live], nxt[live], mask[live], pos[live]
        pos = pos + 1
        mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
        if step is not None:
            logits = step(nxt, mask, pos, cache)  # (b, V)
        else:
            out = model(input_ids=nxt.unsqueeze(-1), attention_mask=mask, position_ids=pos.unsqueeze(-1),
                        use_cache=True, **{kw: cache})
            logits = out.logits[:, -1, :]
    if keep:  # the rows still generating at the last step
        for j, c in zip(alive.tolist(), _row_caches(cache, mask, torch.arange(len(alive), device=dev))):
            kept[j] = c
    return ids, logp, lengths, (kept if keep else None), floors
