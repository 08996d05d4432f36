"""Async rounds (`max_staleness`) and the `worker` engine, on the real tiny model and a real generation process.

- the worker engine samples what the in-process hf engine samples (same weights, same seed), follows
  weight pushes, and reports a dead process or a failed request as an error, never as an empty round;
- max_staleness = 0 through the worker engine is the synchronous loop: the same samples as engine hf;
- with max_staleness = k every sample trained at step t was sampled by weights exactly min(k, t - 1)
  updates old, and two runs of the same config give the same archive (the threads' interleaving does
  not leak into the trajectory);
- the configs that cannot overlap generation with the update are refused, naming the field.
Kill-and-resume of an async run is in test_resume.py.
"""
import json

import pytest
import torch

from reasoning_rl import config
from reasoning_rl.config.knobs import ConfigError
from reasoning_rl.config.sections import Config
from reasoning_rl.rollout import HFEngine, SamplingConfig
from reasoning_rl.rollout.openai import RolloutError
from reasoning_rl.rollout.worker import WorkerEngine
from reasoning_rl.models.tiny.model import build_tiny
from reasoning_rl.trainers.grpo import train_grpo

ROWS = ["12+3=", "7*8=", "40-9="]


@pytest.fixture(scope="module")
def tiny():
    return build_tiny(Config())


@pytest.mark.timeout(300)
def test_worker_engine_samples_as_hf_does_and_follows_pushes(tiny, tmp_path):
    model, tok = tiny
    s = SamplingConfig(temperature=1.0, max_tokens=10, seed=7)
    engine = WorkerEngine(model, tok, str(tmp_path))
    try:
        def same(a, b):
            return all(x.token_ids == y.token_ids and x.finish_reason == y.finish_reason
                       and max((abs(p - q) for p, q in zip(x.logprobs, y.logprobs)), default=0.0) < 1e-4
                       for ga, gb in zip(a, b) for x, y in zip(ga.samples, gb.samples))

        before = engine.generate(ROWS, 4, s)
        assert [g.prompt_id for g in before] == ["0", "1", "2"] and all(len(g.samples) == 4 for g in before)
        assert same(before, HFEngine(model, tok).generate(ROWS, 4, s))
        moved = build_tiny(Config())[0]
        with torch.no_grad():
            for p in moved.parameters():
                p.add_(0.3 * torch.randn_like(p))
        engine.update_weights(moved)  # the process now samples from the moved weights, not its start
        after = engine.generate(ROWS, 4, s)
        assert same(after, HFEngine(moved, tok).generate(ROWS, 4, s)) and not same(after, before)
        assert engine.pushes == 1 and not list(tmp_path.glob("weights-*"))  # the pushed file is gone once loaded

        with pytest.raises(RolloutError, match="failed"):  # a request that raises there: an error, and it serves on
            engine.generate([{"prompt": None, "prompt_id": "x"}], 2, s)  # no text to tokenize
        assert len(engine.generate(ROWS[:1], 2, s)[0].samples) == 2
        engine.proc.kill()
        with pytest.raises(RolloutError, match="died|closed"):  # a dead process is never an empty round
            engine.generate(ROWS, 2, s)
        with pytest.raises(RolloutError, match="start a new engine"):
            engine.generate(ROWS, 2, s)
    finally:
        engine.close()


@pytest.mark.timeout(300)
def test_worker_engine_samples_a_lora_policy_as_hf_does_and_follows_its_pushes(tmp_path):
    """With adapters the process holds the merged model (models/lora.py merged_state): it samples what the hf
    engine samples from the PEFT model itself, before and after the adapters move."""
    from reasoning_rl.models.lora import maybe_lora

    cfg = config.load(Config, overrides=["model.sft_warm_start=false", "model.lora.r=4", "model.lora.alpha=8"])
    model, tok = build_tiny(cfg)
    model = maybe_lora(model, cfg)
    s = SamplingConfig(temperature=1.0, max_tokens=10, seed=7)

    def same(a, b):
        return all(x.token_ids == y.token_ids and max((abs(p - q) for p, q in zip(x.logprobs, y.logprobs)),
                                                       default=0.0) < 1e-4 for ga, gb in zip(a, b)
                   for x, y in zip(ga.samples, gb.samples))

    def move_adapters():
        with torch.no_grad():
            for n, p in model.named_parameters():
                if "lora_" in n:
                    p.add_(0.5 * torch.randn_like(p))

    move_adapters()  # B starts at zero: moved first, so the merge is not the base alone
    engine = WorkerEngine(model, tok, str(tmp_path))
    try:
        before = engine.generate(ROWS, 4, s)
        assert same(before, HFEngine(model, tok).generate(ROWS, 4, s))
        move_adapters()
        engine.update_weights(model)
        after = engine.generate(ROWS, 4, s)
        assert same(after, HFEngine(model, tok).generate(ROWS, 4, s)) and not same(after, before)
    finally:
        engine.close()


def _cfg(tmp_path, name, *extra):
    return config.load(Config, overrides=[
        f"output_dir={tmp_path / name}", "model.sft_warm_start=false", "model.tiny.num_layers=1",
        "grpo.steps=4", "grpo.prompts_per_step=4", "grpo.group_size=4", "eval.size=10", "grpo.eval_every=4",
        "grpo.filter_mixed=false", "grpo.train_prompts=32", "grpo.verifier_workers=1", "grpo.lr=3e-3",
        "grpo.checkpoint_every=0", *extra])


def _archive(out):
    return [json.loads(x) for x in (out / "archive.jsonl").read_text().splitlines()]


@pytest.mark.slow  # two whole runs, one with a generation process: about 12 s
@pytest.mark.timeout(600)
def test_synchronous_worker_run_is_the_hf_run(tmp_path):
    """max_staleness 0 with the worker engine: each round is made from the weights after the previous update,
    while the trainer waits, so it samples exactly what the in-process engine samples."""
    hf, _, _ = train_grpo(_cfg(tmp_path, "hf"), log=lambda *_: None)
    wk, _, _ = train_grpo(_cfg(tmp_path, "worker", "grpo.engine=worker"), log=lambda *_: None)
    a, b = _archive(tmp_path / "hf"), _archive(tmp_path / "worker")
    assert [(r["step"], r["prompt_id"], r["text"]) for r in a] == [(r["step"], r["prompt_id"], r["text"]) for r in b]
    assert {r["staleness"] for r in a + b} == {0} and [r["weight_version"] for r in b] == [r["step"] - 1 for r in b]
    assert any(h["train/samples"] for h in hf if "train/samples" in h), "nothing trained: the test proves nothing"
    for x, y in zip(hf, wk):
        assert y["reward/mean"] == x["reward/mean"] and y["rollout/staleness_max"] == 0
        assert y["loss/policy"] == pytest.approx(x["loss/policy"], abs=1e-5)


@pytest.mark.timeout(900)
@pytest.mark.slow  # three runs with a generation process each; the fast suite keeps the synchronous worker check
@pytest.mark.parametrize("k", [1, 2])
def test_async_samples_are_exactly_k_updates_stale_and_the_run_is_reproducible(tmp_path, k):
    runs = []
    for name in ("a", "b"):
        history, _, _ = train_grpo(_cfg(tmp_path, name, "grpo.engine=worker", f"grpo.max_staleness={k}"),
                                   log=lambda *_: None)
        runs.append(history)
    a, b = _archive(tmp_path / "a"), _archive(tmp_path / "b")
    assert len(a) == 4 * 4 * 4
    for r in a:  # round t was requested at step t - k from the weights after update t - k - 1 (or the start)
        assert r["staleness"] == min(k, r["step"] - 1) and r["weight_version"] == max(0, r["step"] - 1 - k), r
    assert [h["rollout/staleness_max"] for h in runs[0]] == [min(k, t - 1) for t in range(1, 5)]
    assert [(r["step"], r["prompt_id"], r["text"]) for r in a] == [(r["step"], r["prompt_id"], r["text"]) for r in b]
    for x, y in zip(*runs):
        assert x["reward/mean"] == y["reward/mean"] and x.get("loss/policy") == pytest.approx(y.get("loss/policy"))
    stale = [h for h in runs[0][1:] if "rollout/is_weight_mean" in h]
    assert stale, "no stale round was corrected"  # the engine is not the trainer: token_tis weighs samples back


@pytest.mark.parametrize("overrides, field", [
    (["grpo.max_staleness=1"], "grpo.max_staleness"),  # engine hf samples from the model being updated
    (["grpo.max_staleness=1", "grpo.engine=vllm"], "grpo.max_staleness"),
    (["grpo.max_staleness=1", "grpo.engine=worker", "grpo.push_every=2"], "grpo.push_every"),
    (["grpo.max_staleness=-1", "grpo.engine=worker"], "max_staleness"),
])
def test_configs_that_cannot_overlap_are_refused_naming_the_field(overrides, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        config.load(Config, overrides=overrides)
