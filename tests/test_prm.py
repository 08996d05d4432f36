"""The PRM path: generated step-by-step solutions, the `prm` verifier, the tiny PRM, and GRPO with
process-supervision advantages from PRM step scores."""
from __future__ import annotations

import random

import pytest

from reasoning_rl import config
from reasoning_rl.config.sections import Config
from reasoning_rl.trainers.tiny_prm import PRMTrainConfig, evaluate_prm, make_data, make_solution
from reasoning_rl.types import Status
from verifiers.prm import AGGREGATES, PRMConfig, PRMVerifier, split_steps


def test_generated_labels_are_right_by_construction():
    rng = random.Random(0)
    cfg = PRMTrainConfig()
    for _ in range(500):
        sol = make_solution(rng, cfg, wrong=rng.random() < 0.5)
        xs = [int(x) for x in sol["prompt"].rstrip("=").split("+")]
        if len(xs) == 2:
            assert sol["labels"] == [int(int(sol["steps"][0]) == xs[0] + xs[1])]
            continue
        s = xs[0]
        for k, (step, x) in enumerate(zip(sol["steps"], xs[1:])):
            lhs, y = step.split("=")
            assert lhs == f"{s}+{x}" and sol["labels"][k] == int(int(y) == s + x)
            s = int(y)
        first = next((k for k, lab in enumerate(sol["labels"]) if lab == 0), None)
        assert first == sol["first_error"]
        assert sum(1 - lab for lab in sol["labels"]) <= 1  # one injected error at most


def test_split_never_overlaps():
    train, test = make_data(PRMTrainConfig(num_train=3000, num_test=200))
    assert not {s["prompt"] for s in train} & {s["prompt"] for s in test}


def test_evaluation_of_perfect_and_useless_scores():
    _, test = make_data(PRMTrainConfig(num_train=10, num_test=300))
    perfect = [[0.9 if lab else 0.1 for lab in s["labels"]] for s in test]
    m = evaluate_prm(perfect, test)
    assert m["first_error_accuracy"] == 1.0 and m["first_error_accuracy_all"] == 1.0 and m["auc_min"] == 1.0
    flat = [[0.7] * len(s["labels"]) for s in test]
    assert evaluate_prm(flat, test)["auc_min"] == 0.5


def test_split_steps_and_aggregates():
    assert split_steps("a\n\nb\n\n\n\nc\n", "\n\n", 64) == ["a", "b", "c"]
    assert split_steps("a\n\nb\n\nc", "\n\n", 2) == ["a", "b\n\nc"]
    xs = [0.9, 0.2, 0.8]
    assert AGGREGATES["min"](xs) == 0.2 and AGGREGATES["last"](xs) == 0.8
    assert AGGREGATES["mean"](xs) == pytest.approx(1.9 / 3) and AGGREGATES["prod"](xs) == pytest.approx(0.144)


@pytest.fixture(scope="module")
def tiny_prm(tmp_path_factory):
    """A PRM trained for a few steps from scratch (mechanics only)."""
    from reasoning_rl.trainers.tiny_prm import train_prm

    out = tmp_path_factory.mktemp("prm")
    cfg = config.load(Config, overrides=[f"prm.output_dir={out}", "prm.steps=20", "prm.init_from_sft=false",
                                         "prm.num_train=500", "prm.num_test=50", "model.tiny.num_layers=1"])
    metrics = train_prm(cfg, log=lambda *_: None)
    return out / "final", metrics


def test_prm_verifier_scores_each_step(tiny_prm):
    path, metrics = tiny_prm
    assert 0.0 <= metrics["auc_min"] <= 1.0 and metrics["n"] == 50
    for agg in AGGREGATES:
        v = PRMVerifier(PRMConfig(model=str(path), aggregate=agg)).verify("1+2=3\n\n3+4=7\n\n7+1=9", prompt="1+2+4+1=")
        assert v.status in (Status.CORRECT, Status.INCORRECT) and v.metrics["steps"] == 3.0
        steps = [v.metrics[f"step_{k}"] for k in range(3)]
        assert v.score == pytest.approx(AGGREGATES[agg](steps))
    batch = PRMVerifier(PRMConfig(model=str(path))).verify_batch(["3", "1+1=2\n\n2+2=5"], [None, None],
                                                                 prompts=["1+2=", "1+1+2="])
    assert [v.metrics["steps"] for v in batch] == [1.0, 2.0]
    assert PRMVerifier(PRMConfig(model=str(path))).verify("   ", prompt="1+2=").status is Status.UNPARSEABLE


def test_plus_minus_mode_reads_a_causal_lm(tmp_path):
    from reasoning_rl.models.load import build_tiny

    model, tok = build_tiny(config.load(Config, overrides=["model.tiny.num_layers=1"]))
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    v = PRMVerifier(PRMConfig(model=str(tmp_path), mode="plus_minus", step_tag=" ")).verify("a\n\nb", prompt="q")
    assert v.metrics["steps"] == 2.0 and 0.0 < v.score < 1.0


@pytest.mark.timeout(600)
def test_grpo_with_prm_step_rewards_and_process_advantages_runs(tiny_prm, tmp_path):
    from reasoning_rl.trainers.grpo import train_grpo

    path, _ = tiny_prm
    cfg = config.load(Config, overrides=[
        f"output_dir={tmp_path}", "model.sft_warm_start=false", "model.tiny.num_layers=1", "grpo.steps=2",
        "grpo.prompts_per_step=4", "grpo.group_size=4", "eval.size=20", "grpo.eval_every=2",
        "grpo.filter_mixed=false", "grpo.train_prompts=32", "grpo.verifier_workers=1",
        "grpo.advantage=process", f"grpo.prm_model={path}"])
    history, _, _ = train_grpo(cfg, log=lambda *_: None)
    assert [h["step"] for h in history] == [1, 2]
    assert all(h.get("train/samples", 0) > 0 for h in history)
    import json
    rows = [json.loads(x) for x in (tmp_path / "archive.jsonl").read_text().splitlines()]
    assert all("prm" in r["verdicts"] for r in rows)


def test_process_advantage_without_a_prm_is_refused(tmp_path):
    # refused when the config is built (a ConfigError, one line on the CLI), before any model or run exists
    with pytest.raises(config.ConfigError, match="grpo.advantage=process needs grpo.prm_model"):
        config.load(Config, overrides=[f"output_dir={tmp_path}", "model.sft_warm_start=false",
                                       "model.tiny.num_layers=1", "grpo.advantage=process"])
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_tiny_prm_finds_the_first_wrong_step(tmp_path, capsys):
    """`reasoning-rl train prm` with its defaults: >= 80% of held-out wrong solutions get their first wrong
    step right, and the min aggregate separates right from wrong solutions."""
    from reasoning_rl.trainers.tiny_prm import train_prm

    cfg = config.load(Config, overrides=[f"prm.output_dir={tmp_path}"])
    m = train_prm(cfg)
    print(f"first wrong step: {m['first_error_accuracy']:.3f} of {m['n_wrong']}; AUC(min) {m['auc_min']:.3f}")
    assert m["first_error_accuracy"] >= 0.8 and m["first_error_accuracy_all"] >= 0.8
    assert m["auc_min"] >= 0.9
