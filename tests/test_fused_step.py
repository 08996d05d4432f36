"""The fused decode step (rollout/fused_step.py): on a small llama and a small qwen2 (random q/k/v biases), a
rollout whose decode steps go through it draws the tokens the model's own forward draws, with log-probs equal up to
float rounding: left-padded prompts of different lengths, a group's samples sharing a prompt's cache, rows ending
at different steps, the plain and the buffered cache, a multi-turn continuation; it takes every decode step and no
prompt's pass, serves only the thread and model it was entered for, and a model it cannot run (another
architecture, bfloat16, a LoRA layer, a hook, a sliding window) is named with the reason and decodes through its
own forward."""
from __future__ import annotations

import contextlib
import copy
import threading

import pytest
import torch

from reasoning_rl.rollout import decode, fused_step, kv_buffer
from reasoning_rl.rollout.cpu_kernels import DECODE_ATTENTION, Kernels, decoding_with

from .helpers.hf_model import biased_decoder

CORPUS = [f"{a} plus {b} is {a + b}." for a in range(20) for b in range(20)]


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def model_tok(request, tmp_path_factory):
    return biased_decoder(tmp_path_factory.mktemp(request.param), CORPUS, request.param)


def prompts(tok):
    enc = tok(["1 plus 2 is", "13 plus 7 is 20. 4 plus", "9"], return_tensors="pt", padding=True)
    return enc["input_ids"], enc["attention_mask"]  # (3, Tp), left-padded to the longest


def rollout(model, ids, mask, eos, **kw):
    """Two samples per prompt at temperature 1, from the same seed (the untrained model's greedy answer repeats one
    token): the same probabilities up to rounding draw the same tokens."""
    torch.manual_seed(0)
    return decode.sample_kept(model, ids, mask, 14, eos_id=eos, temperature=1.0, repeats=2, **kw)


@pytest.fixture
def counted(monkeypatch):
    """How many times the fused step ran (a class-level spy: an instance hook would make the model unsupported)."""
    calls = []
    real = fused_step._Step.__call__

    def spy(self, tokens, mask, pos, cache):
        calls.append(tokens.shape[0])
        return real(self, tokens, mask, pos, cache)

    monkeypatch.setattr(fused_step._Step, "__call__", spy)
    return calls


@pytest.mark.parametrize("buffered", [False, True], ids=["dynamic cache", "buffered cache"])
def test_a_rollout_on_the_fused_step_draws_what_the_models_forward_draws(model_tok, counted, buffered):
    model, tok = model_tok
    ids, mask = prompts(tok)
    plain = rollout(model, ids, mask, eos=-1)
    # an end token the model draws mid-way in some answer but in no row's first two, so rows end later
    eos = next(t for t in plain[0][:, 2:8].flatten().tolist() if t not in plain[0][:, :2])
    expected = rollout(model, ids, mask, eos=eos)
    assert expected[2].min() < expected[2].max()  # rows of different lengths: finished rows are dropped mid-way
    with fused_step.stepping(model, 4) as on, (kv_buffer.buffering() if buffered else contextlib.nullcontext()):
        got = rollout(model, ids, mask, eos=eos)
    assert on and fused_step.active(model) is None  # entered, and gone on exit
    assert torch.equal(got[0], expected[0]) and torch.equal(got[2], expected[2])
    assert torch.allclose(got[1], expected[1], atol=1e-4, rtol=0)
    assert len(counted) == int(expected[2].max()) - 1  # every decode step, none for the prompts' pass
    assert counted[0] == 6 and counted[-1] < 6  # the batch shrinks as rows end


def test_a_continued_turn_on_the_fused_step_matches_the_models_forward(model_tok, counted):
    """A second turn continues each row's cache (decode.continue_cache): the new input's pass goes through the
    model, the decode steps through the fused step, over positions that start where the first turn ended."""
    model, tok = model_tok
    ids, mask = prompts(tok)
    results = []
    for fused in (False, True):
        with fused_step.stepping(model, 4) if fused else contextlib.nullcontext():
            torch.manual_seed(0)
            first = decode.sample_kept(model, ids, mask, 6, eos_id=-1, keep=True)
            past = decode.continue_cache(model, first[3], [int(m.sum()) + 5 for m in mask])
            nxt = tok([" plus 3 is"] * 3, return_tensors="pt")
            results.append(decode.sample_kept(model, nxt["input_ids"], nxt["attention_mask"], 8, eos_id=-1,
                                              past=past))
    assert torch.equal(results[0][0], results[1][0])
    assert torch.allclose(results[0][1], results[1][1], atol=1e-4, rtol=0)
    assert len(counted) == 5 + 7  # the first turn's steps, then the second's


def test_the_step_serves_only_its_thread_and_model(model_tok, counted):
    model, tok = model_tok
    other = copy.deepcopy(model)
    ids, mask = prompts(tok)
    seen = {}

    def elsewhere():
        seen["thread"] = fused_step.active(model)
        rollout(model, ids, mask, eos=-1)

    with fused_step.stepping(model, 4):
        worker = threading.Thread(target=elsewhere)
        worker.start()
        worker.join()
        assert seen["thread"] is None and counted == []  # another thread decodes through the model's forward
        assert fused_step.active(other) is None  # another model too
        rollout(other, ids, mask, eos=-1)
        assert counted == []
        assert fused_step.active(model) is not None


def _attention(model) -> set:
    """The attention implementations `model`'s configs name."""
    return {c._attn_implementation for m in model.modules() if (c := getattr(m, "config", None)) is not None}


def test_decoding_with_the_step_packs_no_layer_of_the_model_and_switches_no_attention(model_tok, counted,
                                                                                     monkeypatch):
    """With the step on, `pack` leaves the model's layers alone (the step's fused copies serve every decode step) and
    `attend` leaves its attention on sdpa (the step has its own): kernel_choice.effective, the rule `auto` times by.
    Without the step, or on a model the step cannot run, both are entered as before."""
    from reasoning_rl.rollout import cpu_kernels

    model, tok = model_tok
    ids, mask = prompts(tok)
    attn = _attention(model)
    packed = []  # the models whose layers `pack` was entered for (it packs only the shapes that win here)
    real = cpu_kernels.packed_linears
    monkeypatch.setattr(cpu_kernels, "packed_linears", lambda m, rows: packed.append(m) or real(m, rows))
    with decoding_with(Kernels(True, False, True, False, True), model, 4):
        assert not any("forward" in m.__dict__ for m in model.modules())
        assert _attention(model) == attn and DECODE_ATTENTION not in attn
        rollout(model, ids, mask, eos=-1)
    assert len(counted) == 13
    with decoding_with(Kernels(True, False, True, False, False), model, 4) as draw:
        assert fused_step.active(model) is None and draw is None
        assert _attention(model) == {DECODE_ATTENTION}
    other = _hooked(copy.deepcopy(model))  # the step cannot run it: packed layers and the decode attention as asked
    with decoding_with(Kernels(True, False, True, False, True), other, 4):
        assert fused_step.active(other) is None
        assert _attention(other) == {DECODE_ATTENTION}
    assert packed == [model, other]  # without the step, and where it cannot run


def _bf16(m):
    return m.to(torch.bfloat16)


def _hooked(m):
    m.model.layers[0].mlp.register_forward_hook(lambda *a: None)
    return m


def _lora(m):
    from peft import LoraConfig, get_peft_model

    return get_peft_model(m, LoraConfig(r=2, target_modules=["q_proj"])).base_model.model


def _other_type(m):
    m.config.model_type = "gpt2"
    return m


def _sliding(m):
    m.config.layer_types = ["sliding_attention"] * m.config.num_hidden_layers
    m.config.sliding_window = 4
    return m


# (what is done to a copy of the small model, the words the reason must hold)
UNSUPPORTED = [
    (_bf16, "float32"),
    (_hooked, "hook"),
    (_lora, "plain nn.Linear"),
    (_other_type, "'gpt2'"),
    (_sliding, "sliding window"),
]


@pytest.mark.parametrize("change, reason", UNSUPPORTED, ids=[r for _, r in UNSUPPORTED])
def test_a_model_the_step_cannot_run_is_named_and_decodes_through_its_own_forward(model_tok, counted, change,
                                                                                  reason):
    model, tok = model_tok
    assert fused_step.supports(model) is None
    changed = change(copy.deepcopy(model))
    why = fused_step.supports(changed)
    assert why is not None and reason in why
    with fused_step.stepping(changed, 4) as on:
        assert not on and fused_step.active(changed) is None
