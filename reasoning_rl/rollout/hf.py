"""The `hf` rollout engine: batched `transformers` generation with sampling, on CPU or GPU.

The engine samples from the very model object the trainer updates (`update_weights` swaps
in another), so "pushing weights" costs nothing. Log-probabilities come from the logits
of each decode step at the sampling temperature (over the kept set where top-p / top-k cut).
A completion ends at EOS (kept as its last token, finish "stop"), at a stop string
(cut before it, finish "stop"), or at `max_tokens` (finish "length").

Sampling runs in `decode.sample_kept`, which drops each row from the batch and the KV cache as it
finishes (at EOS, at a stop string, or at max_tokens). `continue_ids` samples one
segment after each of several token sequences (a multi-turn episode's next turn, rollout/episodes.py).

A group's prompt is run through the model once and its KV cache copied for each sample; an episode's cache is
kept from one turn to the next (`continue_ids` with keys), so a turn runs only the observation through the model.
On a CPU a call runs on the kernels `sampling.cpu_decode` chooses (cpu_kernels.py: prepacked linear weights, one
uniform draw per token and a decode step's attention as two batched products, for the call's length).

Not here: KV-cache reuse across groups or rounds, speculative decoding, multi-GPU (see vllm).
"""
from __future__ import annotations

from typing import Sequence

from ..models.logprobs import pad_prompts
from ..types import Group, Sample
from ..models.cache import reusable
from . import cpu_kernels, decode
from .base import PromptRow, SamplingConfig, as_rows, common_prefix, render_prompt, stop_ids


class HFEngine:
    def __init__(self, model, tokenizer, batch_size: int = 128) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        if tokenizer.pad_token_id is None:
            raise ValueError("hf engine: the tokenizer has no pad token; set tokenizer.pad_token")
        self._turn_kv: dict = {}  # key -> (ids the cache covers, decode.RowCache): continue_ids's kept caches

    def update_weights(self, model) -> None:
        """Use these weights from now on (the same object the trainer updates, or a copy of its state)."""
        if model is not self.model:
            self.model.load_state_dict(model.state_dict())

    def generate(self, prompts: Sequence[PromptRow | dict | str], n: int, sampling: SamplingConfig) -> list[Group]:
        import torch

        if n < 1:
            raise ValueError(f"generate: n must be >= 1, got {n}")
        rows = as_rows(prompts)
        tok = self.tokenizer
        tok.padding_side = "left"
        texts = [render_prompt(tok, r.prompt, sampling.chat) for r in rows]
        if sampling.seed is not None:
            torch.manual_seed(sampling.seed)
        was_training = self.model.training
        self.model.eval()
        samples: list[Sample] = []
        per_batch = max(1, self.batch_size // n)  # prompts per batch: batch_size sequences, a group never split
        try:
            with cpu_kernels.decoding(sampling.cpu_decode, self.model, min(len(texts), per_batch) * n) as draw:
                for i in range(0, len(texts), per_batch):
                    samples.extend(self._batch(texts[i:i + per_batch], n, sampling, draw))
        finally:
            self.model.train(was_training)
        groups = []
        for k, r in enumerate(rows):
            groups.append(Group(r.prompt_id, r.prompt, r.row, samples[k * n:(k + 1) * n]))
        return groups

    def continue_ids(self, seqs: Sequence[Sequence[int]], max_new: int, stops: Sequence[int], sampling: SamplingConfig,
                     seeds: Sequence[int] | None = None, keys: Sequence | None = None
                     ) -> list[tuple[list[int], list[float]]]:
        """One segment after each token sequence, in one batch: its ids up to and including the first of `stops`
        (or `max_new` of them) and their log-probs. Draws from torch's global generator (`seeds` are for engines
        that seed each request; the caller seeds torch). Sequences that come in runs of equal length of the same ids
        (a group's episodes at their first turn) are run through the model once per run and their cache copied, as
        `generate` does with a group's prompt (sampling.share_prefill).

        `sampling.stop`: a segment also ends at the token that completes one of these strings (kept: an episode's
        tool call closing, which the caller cuts at). `keys` name the sequences across calls (an episode each, turn
        after turn): each one's KV cache is kept at
        its end, and the next call with its key runs only what is new after the part of the cache still valid (the
        longest common prefix of the ids cached and the ids given), sampling.reuse_turn_cache; `forget(keys)` frees
        them. Every row runs the same number of new tokens (the most any row needs), so a row with a shorter
        observation recomputes a few cached tokens: the batch stays left-padded only."""
        model, pad = self.model, self.tokenizer.pad_token_id
        seqs = [list(s) for s in seqs]
        reuse = keys is not None and sampling.reuse_turn_cache and reusable(model)
        past, fresh = None, [0] * len(seqs)
        if reuse:
            have = [self._turn_kv.get(k) for k in keys]
            common = [min(common_prefix(h[0], s), len(s) - 1) if h else 0 for h, s in zip(have, seqs)]
            new = max(len(s) - c for s, c in zip(seqs, common))  # tokens every row runs
            fresh = [max(0, len(s) - new) for s in seqs]  # cached positions each row keeps
            past = decode.continue_cache(model, [h[1] if h else None for h in have], fresh)
        repeats = _runs(seqs) if sampling.share_prefill and past is None else 1
        input_ids, attn = (x.to(model.device) for x in pad_prompts([s[f:] for s, f in zip(seqs, fresh)][::repeats],
                                                                    pad))
        with cpu_kernels.decoding(sampling.cpu_decode, model, len(seqs)) as draw:
            out, logp, lengths, caches, _ = decode.sample_kept(
                model, input_ids, attn, max_new, list(stops), temperature=sampling.temperature, top_p=sampling.top_p,
                top_k=sampling.top_k, repeats=repeats, past=past, keep=reuse, draw=draw, share=sampling.share_prefill,
                stop_texts=sampling.stop, tokenizer=self.tokenizer)
        result = [(ids[:n], lp[:n]) for ids, lp, n in zip(out.tolist(), logp.tolist(), lengths.tolist())]
        if reuse:  # each row's cache covers its ids and every sampled token but the last
            for k, s, (ids, _), c in zip(keys, seqs, result, caches):
                self._turn_kv[k] = (s + ids[:-1], c)
        return result

    def forget(self, keys: Sequence) -> None:
        """Free the caches `continue_ids` kept for these keys (an episode that ended)."""
        for k in keys:
            self._turn_kv.pop(k, None)

    def _batch(self, texts: list[str], n: int, s: SamplingConfig, draw=None) -> list[Sample]:
        """n samples of each prompt, prompt by prompt (each prompt's forward pass made once, decode.py); `draw`
        samples a token in place of torch.multinomial (cpu_kernels.py). A sample that completes a stop string ends
        at the token that completed it (kept in its ids, as EOS is: the tokens trained are the tokens sampled);
        its text is cut before the string."""
        tok = self.tokenizer
        if not s.share_prefill:  # every sample a row of its own
            texts, n = [t for t in texts for _ in range(n)], 1
        enc = tok(texts, return_tensors="pt", padding=True)
        enc = {k: v.to(self.model.device) for k, v in enc.items()}
        eos = stop_ids(self.model, tok)  # EOS and a chat model's end-of-turn
        ids, lp, lengths, _, floors = decode.sample_kept(
            self.model, enc["input_ids"], enc["attention_mask"], s.max_tokens, eos, s.temperature, s.top_p,
            s.top_k, repeats=n, draw=draw, share=s.share_prefill, stop_texts=s.stop, tokenizer=tok)
        result = []
        rows_floors = floors.tolist() if floors is not None else [()] * len(lengths)
        for row, row_lp, row_floor, n in zip(ids.tolist(), lp.tolist(), rows_floors, lengths.tolist()):
            row, row_lp = row[:n], row_lp[:n]
            text, stopped = decode.cut_at_stop(tok.decode(row, skip_special_tokens=True), s.stop)
            finish = "stop" if stopped or (row and row[-1] in eos) else "length"
            result.append(Sample(text, tuple(row), tuple(row_lp), finish, floors=tuple(row_floor[:n])))
        return result


def _runs(seqs: Sequence[Sequence[int]]) -> int:
    """k > 1 when `seqs` is consecutive runs of k identical sequences each (k the longest such), else 1."""
    for k in range(len(seqs), 1, -1):
        if len(seqs) % k == 0 and all(list(seqs[i]) == list(seqs[i - i % k]) for i in range(len(seqs))):
            return k
    return 1
