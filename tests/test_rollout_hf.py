"""The `hf` rollout engine on the real tiny model: shapes, finish reasons, pi_old log-probs,
weight pushes, stop strings, seeds; and `reasoning-rl curate` end to end."""
import json
import subprocess

import pytest
import torch

from reasoning_rl import config
from reasoning_rl.config.sections import Config
from reasoning_rl.models.load import build_tiny
from reasoning_rl.rollout import HFEngine, PromptRow, SamplingConfig, logprob_mismatch

from .conftest import PY, run_env

PROMPTS = [PromptRow("a", "12+30=", {"answer": "42"}), PromptRow("b", "7*8=", {"answer": "56"}),
           PromptRow("c", "100-1=", {"answer": "99"})]


@pytest.fixture(scope="module")
def tiny():
    model, tok = build_tiny(config.load(Config, overrides=["model.tiny.num_layers=2"]))
    return model.eval(), tok


def test_groups_shapes_finish_reasons_and_logprobs(tiny):
    model, tok = tiny
    eng = HFEngine(model, tok, batch_size=5)  # a batch size that splits groups across batches
    groups = eng.generate(PROMPTS, n=4, sampling=SamplingConfig(temperature=1.0, max_tokens=6, seed=0))
    assert [g.prompt_id for g in groups] == ["a", "b", "c"] and all(len(g.samples) == 4 for g in groups)
    assert groups[0].row == {"answer": "42"}
    for g in groups:
        for s in g.samples:
            assert len(s.token_ids) == len(s.logprobs) >= 1
            assert all(lp <= 0 for lp in s.logprobs)
            if s.finish_reason == "length":
                assert len(s.token_ids) == 6 and tok.eos_token_id not in s.token_ids
            else:
                assert s.token_ids[-1] == tok.eos_token_id
            assert s.text == tok.decode(list(s.token_ids), skip_special_tokens=True)
    m = logprob_mismatch(model, tok, groups)
    assert m["rollout/logprob_mismatch_max"] < 1e-4, m  # engine log-probs = the trainer's recomputation


def test_temperature_scaled_logprobs_match_recomputation(tiny):
    model, tok = tiny
    groups = HFEngine(model, tok).generate(PROMPTS, 3, SamplingConfig(temperature=0.7, max_tokens=5, seed=1))
    assert logprob_mismatch(model, tok, groups, temperature=0.7)["rollout/logprob_mismatch_max"] < 1e-4
    assert logprob_mismatch(model, tok, groups, temperature=1.0)["rollout/logprob_mismatch_max"] > 1e-3


def test_seed_reproduces_and_greedy_is_deterministic(tiny):
    model, tok = tiny
    eng = HFEngine(model, tok)
    s = SamplingConfig(temperature=1.0, max_tokens=6, seed=123)
    a = [x.token_ids for g in eng.generate(PROMPTS, 4, s) for x in g.samples]
    b = [x.token_ids for g in eng.generate(PROMPTS, 4, s) for x in g.samples]
    assert a == b
    g = eng.generate(PROMPTS[:1], 3, SamplingConfig(temperature=0.0, max_tokens=6))
    assert len({x.token_ids for x in g[0].samples}) == 1


def test_pushed_weights_change_the_output(tiny):
    model, tok = tiny
    eng = HFEngine(model, tok)
    s = SamplingConfig(temperature=1.0, max_tokens=6, seed=5)
    before = [(x.token_ids, x.logprobs) for g in eng.generate(PROMPTS, 2, s) for x in g.samples]
    other, _ = build_tiny(config.load(Config, overrides=["model.tiny.num_layers=2", "seed=7"]))
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    try:
        eng.update_weights(other)
        groups = eng.generate(PROMPTS, 2, s)
        after = [(x.token_ids, x.logprobs) for g in groups for x in g.samples]
        assert after != before
        assert torch.equal(eng.model.lm_head.weight, other.lm_head.weight)
        assert logprob_mismatch(other, tok, groups)["rollout/logprob_mismatch_max"] < 1e-4  # sampled by `other`
    finally:
        model.load_state_dict(saved)


def test_stop_strings_cut_the_completion(tiny):
    model, tok = tiny
    eng = HFEngine(model, tok)
    groups = eng.generate(PROMPTS, 4, SamplingConfig(temperature=1.5, max_tokens=12, seed=0, stop=("1",)))
    stopped = 0
    for s in (x for g in groups for x in g.samples):
        assert "1" not in s.text
        whole = tok.decode(list(s.token_ids), skip_special_tokens=True)
        if "1" in whole:  # ended at the token that completed the stop string: kept in the ids, cut from the text
            stopped += 1
            assert s.finish_reason == "stop" and "1" not in tok.decode(list(s.token_ids[:-1]))
            assert s.text == whole[:whole.index("1")]
    assert stopped > 0  # the draw at temperature 1.5 writes a 1 somewhere; otherwise the test tests nothing
    # the ids the trainer trains are the ids sampled: their log-probs recomputed by the model agree
    assert logprob_mismatch(model, tok, groups, temperature=1.5)["rollout/logprob_mismatch_max"] < 1e-4


def test_decode_loop_matches_generate_and_truncates(tiny):
    """decode.sample drops finished rows from the batch and the cache: greedy outputs equal `generate`'s,
    and top-k 1 or a tiny top-p sample the greedy token, whose log-prob over the kept set (itself alone) is 0."""
    from reasoning_rl.rollout import decode

    model, tok = tiny
    tok.padding_side = "left"
    enc = tok(["12+30=", "7*8=", "100-1=", "5="], return_tensors="pt", padding=True)
    ref = model.generate(**enc, max_new_tokens=10, do_sample=False, pad_token_id=tok.pad_token_id,
                         eos_token_id=tok.eos_token_id)[:, enc["input_ids"].shape[1]:]
    ids, logp, lengths = decode.sample(model, enc["input_ids"], enc["attention_mask"], 10, tok.eos_token_id, 0.0)
    for b in range(4):
        n = int(lengths[b])
        assert ids[b, :n].tolist() == ref[b, :n].tolist()
        assert n == 10 or ids[b, n - 1] == tok.eos_token_id
    for kw in ({"top_k": 1}, {"top_p": 1e-6}):
        ids2, logp2, lengths2 = decode.sample(model, enc["input_ids"], enc["attention_mask"], 10, tok.eos_token_id,
                                              1.0, **kw)
        assert torch.equal(ids2, ids) and torch.equal(lengths2, lengths)
        assert bool((logp2 == 0).all()) and bool((logp < -1e-3).any())  # the drawn distribution's, not the whole one's


def test_a_stop_string_ends_a_row_at_the_token_that_completes_it(tiny):
    """decode.sample_kept with stop_texts: each row's greedy tokens are the same as without them up to the first
    token whose text completes a stop string, and end there (that token kept); rows that never write one run on."""
    from reasoning_rl.rollout import decode

    model, tok = tiny
    tok.padding_side = "left"
    enc = tok(["12+30=", "7*8=", "100-1=", "5="], return_tensors="pt", padding=True)
    full, _, flen, _, _ = decode.sample_kept(model, enc["input_ids"], enc["attention_mask"], 24, tok.eos_token_id, 0.0)
    texts = [tok.decode(full[b, :int(flen[b])].tolist(), skip_special_tokens=False) for b in range(4)]
    stop = next(ch for ch in "0123456789+-=*" if any(ch in t for t in texts))  # a character some row writes
    ids, _, lengths, _, _ = decode.sample_kept(model, enc["input_ids"], enc["attention_mask"], 24, tok.eos_token_id,
                                               0.0, stop_texts=(stop,), tokenizer=tok)
    for b in range(4):
        n = int(lengths[b])
        assert ids[b, :n].tolist() == full[b, :n].tolist()
        cut = next((k + 1 for k in range(int(flen[b]))
                    if stop in tok.decode(full[b, :k + 1].tolist(), skip_special_tokens=False)), int(flen[b]))
        assert n == cut, (b, texts[b], stop)


def test_shared_prefill_samples_what_repeated_prompts_sample(tiny):
    """repeats=n runs each prompt once and copies its cache n ways: under one seed it draws the very tokens that n
    copies of the prompt draw, with the same log-probs up to float noise of the prefill's batch shape."""
    from reasoning_rl.rollout import decode

    model, tok = tiny
    tok.padding_side = "left"
    prompts, n = ["12+30=", "7*8=", "100-1="], 4
    flat = tok([p for p in prompts for _ in range(n)], return_tensors="pt", padding=True)
    torch.manual_seed(3)
    ids, logp, lengths = decode.sample(model, flat["input_ids"], flat["attention_mask"], 12, tok.eos_token_id, 1.0)
    once = tok(prompts, return_tensors="pt", padding=True)
    torch.manual_seed(3)
    ids2, logp2, lengths2 = decode.sample(model, once["input_ids"], once["attention_mask"], 12, tok.eos_token_id,
                                          1.0, repeats=n)
    assert ids2.shape == (len(prompts) * n, 12)
    assert torch.equal(ids2, ids) and torch.equal(lengths2, lengths)
    assert torch.allclose(logp2, logp, atol=1e-4)
    assert len({tuple(r) for r in ids[:n].tolist()}) > 1  # the copies really are sampled independently


def test_bad_inputs_are_clear_errors(tiny):
    model, tok = tiny
    with pytest.raises(ValueError, match="n must be >= 1"):
        HFEngine(model, tok).generate(PROMPTS, 0, SamplingConfig())
    with pytest.raises(ValueError, match="no 'prompt' column"):
        HFEngine(model, tok).generate([{"question": "1+1="}], 1, SamplingConfig())


@pytest.mark.timeout(600)
def test_cli_curate_writes_pass_rate_columns(tmp_path):
    env = run_env(REASONING_RL_CACHE=str(tmp_path / "cache"))
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"prompt_id": f"q{i}", "prompt": f"{i}+{i}=", "answer": str(2 * i)}) + "\n"
                            for i in range(6)))
    r = subprocess.run([PY, "-m", "reasoning_rl", "curate", "--dataset", str(data), "-n", "4", "--output",
                        str(tmp_path / "out"), "--ledger", str(tmp_path / "l.sqlite"), "--set", "sft.steps=10",
                        "--set", "eval.size=10"], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in (tmp_path / "out" / "data.jsonl").read_text().splitlines()]
    assert [x["prompt_id"] for x in rows] == [f"q{i}" for i in range(6)]
    for x in rows:
        assert x["attempts"] + x["masked"] == 4
        assert x["mixed"] == (0 < x["passes"] < x["attempts"])
    from curricula import Ledger
    from datasets import load_from_disk

    assert load_from_disk(str(tmp_path / "out" / "dataset")).column_names[-4:] == ["passes", "pass_rate", "mixed",
                                                                                    "masked"]
    with Ledger(tmp_path / "l.sqlite") as led:
        assert led.get("q0").attempts == rows[0]["attempts"]


def test_a_chat_models_end_of_turn_ends_a_completion_beside_eos(tmp_path):
    """generation_config.eos_token_id may list more than the tokenizer's EOS (Qwen: <|im_end|> and <|endoftext|>):
    the first of them a row emits ends it, with finish "stop"."""
    import torch

    from reasoning_rl.rollout import HFEngine, SamplingConfig
    from reasoning_rl.rollout.base import stop_ids

    from .helpers.hf_model import build_hf_model, gsm8k_rows

    path = build_hf_model(tmp_path / "m", [r["question"] for r in gsm8k_rows(20)], vocab_size=300)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model, tok = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    tok.padding_side = "left"
    ids = tok(["Ann has"], return_tensors="pt")["input_ids"]
    with torch.no_grad():
        first = int(model(input_ids=ids).logits[0, -1].argmax())  # the greedy first token: make it an end-of-turn
    model.generation_config.eos_token_id = [tok.eos_token_id, first]
    assert stop_ids(model, tok) == [tok.eos_token_id, first]
    (g,) = HFEngine(model, tok).generate(["Ann has"], 1, SamplingConfig(temperature=0.0, max_tokens=8))
    assert g.samples[0].token_ids == (first,) and g.samples[0].finish_reason == "stop"
