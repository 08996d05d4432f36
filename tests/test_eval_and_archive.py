"""pass@k against brute-force enumeration, maj@k, and the rollout archive round trip."""
import itertools
import json
import subprocess
from math import comb

import pytest

from reasoning_rl.data.archive import read_archive, write_groups
from reasoning_rl.eval.metrics import evaluate_sampled, majority_correct, pass_at_k, scored_outcome
from reasoning_rl.types import Group, Sample, Status, Verdict

from .conftest import PY, run_env


@pytest.mark.parametrize("n,c,k", [(5, 0, 1), (5, 2, 1), (5, 2, 2), (5, 2, 3), (6, 1, 6), (8, 3, 4), (10, 7, 5)])
def test_pass_at_k_equals_enumeration(n, c, k):
    outcomes = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    brute = sum(any(outcomes[i] for i in s) for s in subsets) / len(subsets)
    assert pass_at_k(n, c, k) == pytest.approx(brute)
    assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k))
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def test_majority_vote():
    assert majority_correct(["4", "5", "4", None], [True, False, True, None]) is True
    assert majority_correct(["5", "5", "4"], [False, False, True]) is False
    assert majority_correct([None, None], [None, None]) is False


def _group(pid, statuses, texts):
    vs = {"c": Verdict.correct(), "i": Verdict.incorrect(), "t": Verdict.masked_as(Status.TIMEOUT)}
    return Group(pid, f"{pid}=", {"answer": "4"}, [Sample(t, verdicts={"math": vs[s]}) for s, t in zip(statuses, texts)])


def test_evaluate_sampled_leaves_masked_samples_out():
    res = evaluate_sampled([_group("a", "cit", ["4", "5", "4"]), _group("b", "ii", ["1", "2"])], "math", (1, 2))
    assert res["pass@1"] == pytest.approx((0.5 + 0.0) / 2)  # the timeout is not an attempt
    assert res["pass@2"] == pytest.approx((1.0 + 0.0) / 2)


def test_evaluate_sampled_reports_avg_at_n_with_standard_errors():
    g = _group("a", "cit", ["4", "5", "4"])
    cut = Group("b", "b=", {"answer": "4"}, [Sample(t, finish_reason="length", verdicts={"math": Verdict.incorrect()})
                                             for t in ("1", "2", "3")])
    res = evaluate_sampled([g, cut], "math", (1, 2))
    assert res["avg@3"] == res["pass@1"] == pytest.approx(0.25)  # per prompt: 1/2 (the timeout is out), 0/3
    assert res["avg@3_se"] == res["pass@1_se"] == pytest.approx(0.25)  # sqrt(var / 2), var = (0.25^2 + 0.25^2) / 1
    assert res["truncated"] == pytest.approx(3 / 6) and res["truncated_se"] > 0
    assert set(res) >= {"pass@2", "pass@2_se", "maj@2", "maj@2_se"}


def test_a_truncated_pass_fails_the_evaluation_unless_scored():
    """eval.truncated: a completion cut at max_tokens that the verifier passed (a number it only restated) is a
    fail by default, and counted as verified with "score"."""
    ok = Verdict.correct()
    g = Group("a", "a=", {"answer": "4"}, [Sample("4", verdicts={"math": ok}),
                                           Sample("4 and then", finish_reason="length", verdicts={"math": ok})])
    assert evaluate_sampled([g], "math", (1,))["pass@1"] == pytest.approx(0.5)
    assert evaluate_sampled([g], "math", (1,), truncated="score")["pass@1"] == pytest.approx(1.0)
    masked = Sample("", finish_reason="length", verdicts={"math": Verdict.masked_as(Status.TIMEOUT)})
    assert scored_outcome(masked, "math") is None  # masked stays masked, never a made-up fail


def test_greedy_evaluation_generates_each_prompt_once(monkeypatch):
    """At temperature 0 the samples are the greedy completions: one generation per prompt, greedy == avg@1; above 0,
    one sampled group and one greedy completion per prompt, the greedy ones archived under their own ids."""
    import torch

    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.eval.sampled import run_eval
    from reasoning_rl.models.load import build_tiny
    from reasoning_rl.rollout import HFEngine, SamplingConfig
    from reasoning_rl.task.task import Task

    torch.manual_seed(0)
    cfg = config.load(Config, None, ["model.tiny.num_layers=1"])
    model, tok = build_tiny(cfg)
    task = Task.from_config(cfg.tasks)
    task.render(tok)
    calls = []
    real = HFEngine.generate
    monkeypatch.setattr(HFEngine, "generate", lambda self, rows, n, s: calls.append((len(rows), n, s.temperature))
                        or real(self, rows, n, s))
    res = run_eval(model, tok, task, task.test[:5], 8, SamplingConfig(temperature=0.0, max_tokens=4), progress=False)
    assert calls == [(5, 1, 0.0)] and len(res.groups) == 5
    assert res.metrics["greedy"] == res.metrics["avg@1"]
    calls.clear()
    res = run_eval(model, tok, task, task.test[:5], 3, SamplingConfig(temperature=1.0, max_tokens=4, seed=0),
                   progress=False)
    assert calls == [(5, 3, 1.0), (5, 1, 0.0)]
    assert [len(g.samples) for g in res.groups] == [3] * 5 + [1] * 5
    assert all(g.prompt_id.endswith("#greedy") for g in res.groups[5:])


def test_archive_round_trip(tmp_path):
    groups = [_group("a", "cit", ["4", "5", "x"]), _group("b", "ci", ["4", "3"])]
    path = tmp_path / "archive.jsonl"
    with open(path, "w") as f:
        assert write_groups(f, groups, step=3) == 5
    back = read_archive(str(path))
    assert [g.prompt_id for g in back] == ["a", "b"]
    assert [[s.verdicts["math"].status for s in g.samples] for g in back] == \
        [[s.verdicts["math"].status for s in g.samples] for g in groups]
    assert back[0].samples[2].verdicts["math"].score is None and back[0].row == {"answer": "4"}
    path.write_text('{"step": 1}\n')
    with pytest.raises(ValueError, match="archive.jsonl:1"):
        read_archive(str(path))


@pytest.mark.slow  # three commands in three fresh interpreters, one of them a training run
@pytest.mark.timeout(600)
def test_cli_pairs_from_a_training_archive_and_eval(tmp_path):
    env = run_env(REASONING_RL_CACHE=str(tmp_path / "cache"))
    # the plumbing, not the learning: a one-layer model from random weights (no warm start to build)
    common = ["--set", "model.sft_warm_start=false", "--set", "model.tiny.num_layers=1", "--set", "eval.size=10"]
    r = subprocess.run([PY, "-m", "reasoning_rl", "train", "grpo", *common, "--set", f"output_dir={tmp_path / 'run'}",
                        "--set", "grpo.steps=2", "--set", "grpo.prompts_per_step=8",
                        "--set", "grpo.filter_mixed=false"], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    archive = tmp_path / "run" / "archive.jsonl"
    assert len(archive.read_text().splitlines()) == 2 * 8 * 8  # every verified sample of both steps
    r = subprocess.run([PY, "-m", "reasoning_rl", "pairs", *common, "--archive", str(archive), "-o",
                        str(tmp_path / "pairs")], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["prompts"] == 16 and summary["pairs"] == len((tmp_path / "pairs" / "pairs.jsonl").read_text().splitlines())
    r = subprocess.run([PY, "-m", "reasoning_rl", "eval", *common, "--limit", "10", "-n", "4", "--set",
                        f"output_dir={tmp_path / 'eval'}"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert 0 <= res["pass@1"] <= res["pass@2"] <= res["pass@4"] <= 1 and "maj@4" in res and "greedy" in res


@pytest.mark.timeout(300)
def test_cli_eval_on_code_tasks_runs_the_programs(tmp_path):
    """`eval` on tasks.kind=code samples function bodies and runs prompt + body against the hidden tests (the
    `code` verifier, not `math`); an untrained model passes nothing, and says so without failing."""
    env = run_env(REASONING_RL_CACHE=str(tmp_path / "cache"))
    r = subprocess.run([PY, "-m", "reasoning_rl", "eval", "--set", "tasks.kind=code", "--set", "tasks.families=[]",
                        "--set", "model.sft_warm_start=false", "--set", "model.tiny.num_layers=1",
                        "--set", "generation.max_tokens=8", "--limit", "6", "-n", "2", "--set",
                        f"output_dir={tmp_path / 'eval'}"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["verifier"] == "code" and res["prompts"] == 6 and res["pass@1"] == 0.0 and res["greedy"] == 0.0


def test_code_majority_votes_on_the_program_text():
    from reasoning_rl.types import Group, Sample, Verdict

    def s(text, ok):
        return Sample(text, (1,), (0.0,), "stop", {"code": Verdict.correct() if ok else Verdict.incorrect()})

    g = Group("a", "def f(x):\n", {}, [s("    return x\n", False), s("    return x \n", False), s("    return 1\n", True)])
    res = evaluate_sampled([g], "code", (1, 2, 3))
    assert res["pass@1"] == pytest.approx(1 / 3) and res["maj@3"] == 0.0  # the wrong body twice outvotes the right one


def test_eval_with_an_environment_runs_episodes_and_reports_their_tool_figures(tmp_path):
    """`reasoning-rl eval --set grpo.environment=...`: every sample (and the greedy one) is a multi-turn episode of
    that environment; the archive keeps its turns, the summary its environment and tools/* figures, and the verdict
    reads the model's words only."""
    from reasoning_rl.cli import main
    from reasoning_rl.rollout.environments import ENVIRONMENTS

    from .helpers.turns import EveryTurnIsACall

    ENVIRONMENTS.add("every-turn-eval", EveryTurnIsACall, "tests")
    out = tmp_path / "eval"
    try:
        assert main(["eval", "--set", "model.sft_warm_start=false", "--set", "model.tiny.num_layers=1", "--set",
                     "generation.max_tokens=4", "--set", "grpo.environment=every-turn-eval", "--set",
                     "grpo.max_turns=3", "--set", "grpo.max_tool_calls=2", "--set", f"output_dir={out}",
                     "--limit", "3", "-n", "2"]) == 0
    finally:
        ENVIRONMENTS.remove("every-turn-eval")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["environment"] == "every-turn-eval" and summary["tools/calls_per_sample"] > 0
    lines = [json.loads(x) for x in (out / "archive.jsonl").read_text().splitlines()]
    assert len(lines) == 3 * 2 + 3 and all(x["turns"] for x in lines)
    for x in lines:
        assert EveryTurnIsACall.OBS not in x["text"]  # what the verifier read: the model's segments only
        assert x["text"] == "".join(t["model"] for t in x["turns"])
