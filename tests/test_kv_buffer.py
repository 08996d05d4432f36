"""The KV cache written in place (rollout/kv_buffer.py): the same keys and values as transformers' concatenating
layer at every step, kept in one buffer while its room lasts, and the same rollouts."""
from __future__ import annotations

import threading

import pytest
import torch

from reasoning_rl.rollout import decode, kv_buffer

from .helpers.hf_model import build_hf_model


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = build_hf_model(tmp_path_factory.mktemp("llama"), [f"{a} plus {b} is {a + b}." for a in range(30)
                                                                for b in range(30)], vocab_size=500, arch="llama")
    return AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


def _states(b, t, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, 2, t, 4, generator=g), torch.randn(b, 2, t, 4, generator=g)  # (b, Hkv, t, D)


def test_a_layer_holds_what_concatenation_holds_in_one_buffer_while_its_room_lasts():
    from transformers.cache_utils import DynamicLayer

    plain, ours = DynamicLayer(), kv_buffer.BufferedLayer(room=3)
    for step, t in enumerate([5, 1, 1, 1, 1, 1]):  # a prompt of 5, then one position a step; room for 3
        k, v = _states(3, t, step)
        want, got = plain.update(k, v), ours.update(k, v)
        for a, b in zip(want, got):
            torch.testing.assert_close(b, a, rtol=0, atol=0)
        if step == 1:
            first = ours.key_buffer.data_ptr()
        if 1 <= step <= 3:  # positions 6-8 fit the room kept at the prompt (5 + 3): written in place
            assert ours.key_buffer.data_ptr() == first and ours.key_buffer.shape[-2] == 8
    assert ours.key_buffer.shape[-2] == 9 + 3  # the 9th position outgrew it: room for 3 more after it
    rows = torch.tensor([2, 0])
    plain.batch_select_indices(rows)
    ours.batch_select_indices(rows)
    plain.batch_repeat_interleave(2)
    ours.batch_repeat_interleave(2)
    k, v = _states(4, 1, 9)
    for a, b in zip(plain.update(k, v), ours.update(k, v)):
        torch.testing.assert_close(b, a, rtol=0, atol=0)
    assert ours.keys.shape == (4, 2, 11, 4)


def test_a_plain_cache_taken_in_keeps_its_positions():
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    cache = DynamicCache()
    cache.layers = [DynamicLayer()]
    k0, v0 = _states(2, 4, 0)
    cache.layers[0].update(k0, v0)
    kv_buffer.buffered(cache, room=2)
    assert type(cache.layers[0]) is kv_buffer.BufferedLayer and cache.get_seq_length() == 4
    held = cache.layers[0].key_buffer.data_ptr()  # copied in at once: the next step writes in place
    k1, v1 = _states(2, 1, 1)
    keys, values = cache.layers[0].update(k1, v1)
    assert cache.layers[0].key_buffer.data_ptr() == held and cache.layers[0].key_buffer.shape[-2] == 6
    torch.testing.assert_close(keys, torch.cat([k0, k1], -2), rtol=0, atol=0)
    torch.testing.assert_close(values, torch.cat([v0, v1], -2), rtol=0, atol=0)


def _rollout(model, tok, buffered: bool, repeats: int = 1, temperature: float = 0.0):
    tok.padding_side = "left"
    enc = tok(["3 plus 4 is", "11 plus 20 is", "7 plus"], return_tensors="pt", padding=True)
    torch.manual_seed(0)
    with kv_buffer.buffering() if buffered else torch.no_grad():
        return decode.sample(model, enc["input_ids"], enc["attention_mask"], 12, tok.eos_token_id, temperature,
                             repeats=repeats)


@pytest.mark.parametrize("repeats, temperature", [(1, 0.0), (4, 1.0)])
def test_a_rollout_on_buffered_caches_is_the_plain_rollout(llama, repeats, temperature, monkeypatch):
    """Greedy, and sampled with a group per prompt (its cache copied per sample, rows ending at different steps
    and dropped): the same tokens, lengths and log-probs."""
    model, tok = llama
    calls = []
    update = kv_buffer.BufferedLayer.update
    monkeypatch.setattr(kv_buffer.BufferedLayer, "update",
                        lambda self, *a, **k: calls.append(1) or update(self, *a, **k))
    ids, logp, lengths = _rollout(model, tok, False, repeats, temperature)
    assert not calls
    ids2, logp2, lengths2 = _rollout(model, tok, True, repeats, temperature)
    assert len(calls) >= 12 * model.config.num_hidden_layers // 2  # every layer's steps went through the buffer
    assert len(set(lengths.tolist())) > 1 or temperature == 0  # rows ended at different steps: some were dropped
    assert torch.equal(ids2, ids) and torch.equal(lengths2, lengths)
    torch.testing.assert_close(logp2, logp, atol=1e-5, rtol=0)


def test_a_continued_turn_on_a_buffered_cache_is_the_plain_turn(llama):
    """A second turn continuing each row's kept cache (`continue_cache`, multi-turn episodes) samples the same."""
    model, tok = llama
    tok.padding_side = "left"
    enc = tok(["3 plus 4 is", "11 plus 20 is"], return_tensors="pt", padding=True)
    out = []
    for buffered in (False, True):
        with kv_buffer.buffering() if buffered else torch.no_grad():
            ids, _, lengths, kept, _ = decode.sample_kept(model, enc["input_ids"], enc["attention_mask"], 4, -1,
                                                          0.0, keep=True)
            keep = [int(enc["attention_mask"][i].sum()) + 3 for i in range(2)]
            past = decode.continue_cache(model, kept, keep)
            nxt = ids[:, 3:4]
            out.append(decode.sample_kept(model, nxt, torch.ones_like(nxt), 5, -1, 0.0, past=past)[:3])
    assert torch.equal(out[0][0], out[1][0])
    torch.testing.assert_close(out[1][1], out[0][1], atol=1e-5, rtol=0)


def test_buffering_is_this_threads_only():
    seen = []
    with kv_buffer.buffering():
        t = threading.Thread(target=lambda: seen.append(kv_buffer.active()))
        t.start()
        t.join()
        assert kv_buffer.active()
    assert seen == [False] and not kv_buffer.active()
