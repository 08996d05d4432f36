"""A prefix every prompt of a batch shares, run once (rollout/decode.py, `share`): `shared_prefix` finds it in a
left-padded batch (a table below); on a small llama and a small qwen2, a rollout that runs it once for one row and
then only each prompt's rest draws the tokens the one left-padded pass draws, with log-probs equal up to float
rounding, through the model's own forward and through the fused decode step on the buffered cache; the rows'
kept caches hold their real positions only, and a second turn continued from them samples what it samples without
the sharing; the hf engine shares under `sampling.share_prefill` and not without it."""
from __future__ import annotations

import contextlib
import functools

import pytest
import torch

from reasoning_rl.rollout import HFEngine, PromptRow, SamplingConfig, decode, fused_step, kv_buffer

from .helpers.hf_model import biased_decoder

CORPUS = [f"{a} plus {b} is {a + b}." for a in range(20) for b in range(20)]
PREFIX = "0 plus 0 is 0. 1 plus 1 is 2. 2 plus 2 is 4. 3 plus 3 is 6. "  # a "system prompt" of 20+ tokens
ENDS = ["1 plus 2 is", "13 plus 7 is 20. 4 plus", "9"]  # each prompt's own rest, of different lengths

P = 0  # a padding id in the table
# (rows, left-padded with P, expected shared_prefix)
TABLE = [
    ([[5, 6, 7, 8], [5, 6, 9, 9]], 2),  # the first two tokens in common
    ([[P, 5, 6, 7], [5, 6, 7, 8]], 2),  # row 0 is 3 real tokens long: at most 2 shared (each row keeps one)
    ([[5, 6, 7], [5, 6, 7]], 2),  # identical rows: all but the last token
    ([[P, P, 5, 6], [5, 6, 5, 6]], 1),  # aligned on each row's first real token, not on the column
    ([[5, 6], [7, 6]], 0),  # the first token differs
    ([[5, 6, 7]], 0),  # one row: nothing to share with
    ([[5], [5]], 0),  # one token each: none to spare
]


@pytest.mark.parametrize("rows, expected", TABLE)
def test_shared_prefix_finds_the_common_start_of_left_padded_rows(rows, expected):
    ids = torch.tensor(rows)
    mask = (torch.arange(ids.shape[1]) >= (ids == P).sum(-1, keepdim=True)).long()  # pads are on the left here
    assert decode.shared_prefix(ids, mask) == expected
    assert decode.run_once(ids, mask) == 0  # fewer than MIN_SHARED: not worth a pass of its own


def test_rows_padded_on_the_right_share_nothing():
    ids, mask = torch.tensor([[5, 6, 7, 0], [5, 6, 7, 8]]), torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    assert decode.shared_prefix(ids, mask) == 0


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def model_tok(request, tmp_path_factory):
    return biased_decoder(tmp_path_factory.mktemp(request.param), CORPUS, request.param)


@pytest.fixture
def passes(model_tok, monkeypatch):
    """The (rows, tokens) of every forward through the model (a class-level spy: an instance hook would keep the
    fused step off)."""
    model, _ = model_tok
    seen = []
    real = type(model).forward

    @functools.wraps(real)  # its signature too: decode.py names the cache argument from it
    def spy(self, *args, **kw):
        seen.append(tuple(kw["input_ids"].shape))
        return real(self, *args, **kw)

    monkeypatch.setattr(type(model), "forward", spy)
    return seen


def batch(tok):
    enc = tok([PREFIX + e for e in ENDS], return_tensors="pt", padding=True)
    return enc["input_ids"], enc["attention_mask"]  # (3, T)


def rollout(model, ids, mask, **kw):
    torch.manual_seed(0)
    return decode.sample_kept(model, ids, mask, 10, eos_id=-1, temperature=1.0, repeats=2, **kw)


@pytest.mark.parametrize("fused", [False, True], ids=["model's forward", "fused step, buffered cache"])
def test_a_shared_prefix_run_once_draws_what_one_left_padded_pass_draws(model_tok, passes, fused):
    model, tok = model_tok
    ids, mask = batch(tok)
    c = decode.shared_prefix(ids, mask)
    assert c >= decode.MIN_SHARED and decode.run_once(ids, mask) == c

    def kernels() -> contextlib.ExitStack:  # the model's forward, or the fused step on the buffered cache
        stack = contextlib.ExitStack()
        if fused:
            stack.enter_context(fused_step.stepping(model, 6))
            stack.enter_context(kv_buffer.buffering())
        return stack

    with kernels():
        whole = rollout(model, ids, mask)
    assert passes[0] == tuple(ids.shape)  # one pass over the padded prompts
    passes.clear()
    with kernels():
        shared = rollout(model, ids, mask, share=True)
    rest = int(mask.sum(-1).max()) - c
    assert passes[:2] == [(1, c), (3, rest)]  # the prefix once, then only each prompt's rest
    assert torch.equal(shared[0], whole[0]) and torch.equal(shared[2], whole[2])
    assert torch.allclose(shared[1], whole[1], atol=1e-4, rtol=0)


def test_kept_caches_hold_real_positions_and_a_second_turn_continues_them(model_tok):
    """With `keep`, each row's cache covers its prompt's real tokens (the prefix and its rest, not the padding
    between them) and its sampled tokens but the last: a second turn continued from them samples what it samples
    from caches of one left-padded pass."""
    model, tok = model_tok
    ids, mask = batch(tok)
    turns = []
    for share in (False, True):
        torch.manual_seed(0)
        first = decode.sample_kept(model, ids, mask, 6, eos_id=-1, temperature=1.0, keep=True, share=share)
        for row, m in zip(first[3], mask):
            assert row[0][0].shape[1] == int(m.sum()) + 5  # (Hkv, L, D): L = real prompt tokens + 6 - 1
        past = decode.continue_cache(model, first[3], [int(m.sum()) + 5 for m in mask])
        nxt = tok([" plus 3 is"] * 3, return_tensors="pt")
        turns.append((first, decode.sample_kept(model, nxt["input_ids"], nxt["attention_mask"], 8, eos_id=-1,
                                                past=past)))
    (a1, a2), (b1, b2) = turns
    assert torch.equal(a1[0], b1[0])
    for ra, rb in zip(a1[3], b1[3]):
        assert all(torch.allclose(ka, kb, atol=1e-4) and torch.allclose(va, vb, atol=1e-4)
                   for (ka, va), (kb, vb) in zip(ra, rb))
    assert torch.equal(a2[0], b2[0]) and torch.allclose(a2[1], b2[1], atol=1e-4, rtol=0)


@pytest.mark.parametrize("share_prefill", [True, False])
def test_the_engine_shares_a_prefix_under_share_prefill_only(model_tok, passes, share_prefill):
    model, tok = model_tok
    rows = [PromptRow(str(i), PREFIX + e) for i, e in enumerate(ENDS)]
    groups = HFEngine(model, tok).generate(rows, 2, SamplingConfig(temperature=1.0, max_tokens=6, seed=0,
                                                                   share_prefill=share_prefill))
    assert [len(g.samples) for g in groups] == [2, 2, 2]
    first = passes[0]
    if share_prefill:
        assert first[0] == 1 and first[1] >= decode.MIN_SHARED  # the prefix, for one row
    else:
        assert first[0] == 6  # every sample its own prompt pass, the prefix in each
