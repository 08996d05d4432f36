"""Reward-hacking monitors on rounds built from real verdicts, and `reverify` on real training runs."""
import json
import subprocess

import pytest

import verifiers
from reasoning_rl import config
from reasoning_rl.config.sections import Config, MonitorConfig
from reasoning_rl.task.task import Task
from reasoning_rl.trainers.monitors import Monitors, binomial_tail, mean_shift_p, pass_category
from reasoning_rl.types import Group, Sample

from .conftest import PY, ROOT, run_env

# (a verdict's detail, the kind of pass it is)
CATEGORIES = [
    ("'132' (last number) == '132'", "last number"),
    ("'7' (boxed) == '7'", "boxed"),
    ("'132' found (anywhere)", "anywhere"),
    ("5/5 tests passed", "tests"),
    ("", "unknown"),
]


@pytest.mark.parametrize("detail,kind", CATEGORIES)
def test_pass_categories(detail, kind):
    assert pass_category(detail) == kind


def _task(outcome="math"):
    return Task.from_config(config.load(Config, overrides=["tasks.num_train=40", "tasks.num_test=5",
                                                           f"tasks.outcome={outcome}"]).tasks)


def _round(task, reward, texts_for, rows=20):
    """Groups of real rows, each sample verified by the reward: texts_for(answer) -> completions."""
    rows = task.train[:rows]
    groups = [Group(r["prompt_id"], r["prompt"], {k: v for k, v in r.items() if k not in ("prompt", "prompt_id")},
                    [Sample(t, (1,) * len(t), (0.0,) * len(t), "stop") for t in texts_for(r["answer"])]) for r in rows]
    flat = [(g, s) for g in groups for s in g.samples]
    verdicts = iter(task.verify(reward, [dict(g.row, prompt=g.prompt) for g, _ in flat], [s.text for _, s in flat]))
    return [Group(g.prompt_id, g.prompt, g.row, [s.with_verdicts(next(verdicts)) for s in g.samples]) for g in groups]


def test_a_second_opinion_flags_passes_the_lenient_verifier_gives_and_not_honest_ones():
    cfg = MonitorConfig(second_opinion="exact", disagreement_max=0.2, window=2, sample=100)
    lenient = _task("contains_answer")
    reward = verifiers.Reward.single("contains_answer")
    mon = Monitors(cfg, lenient, reward)
    m = mon.observe(1, _round(lenient, reward, lambda a: [a + "0", "x " + a + " y", a]), {})
    assert m["monitor/disagreement"] == pytest.approx(2 / 3) and mon.pop_alerts() == []  # one round: no window yet
    m = mon.observe(2, _round(lenient, reward, lambda a: [a, a, a]), {})
    # 40 of 120 re-checked passes over the window against a threshold of 0.2: p = 0.0006
    assert m["monitor/disagreement_mean"] == pytest.approx(1 / 3) and len(mon.pop_alerts()) == 1
    honest = _task("math")
    mon = Monitors(cfg, honest, verifiers.Reward.single("math"))
    for step in (1, 2):
        m = mon.observe(step, _round(honest, verifiers.Reward.single("math"), lambda a: [a, "\n1+1=2\n" + a, "x"]), {})
    assert m["monitor/disagreement"] == 0.0 and mon.pop_alerts() == []


def test_a_new_way_of_passing_is_flagged_against_its_own_history():
    task = _task("contains_answer")
    reward = verifiers.Reward.single("contains_answer")
    mon = Monitors(MonitorConfig(window=2, category_shift_max=0.25), task, reward)
    for step in (1, 2):  # the verdicts' kind never changes: quiet
        mon.observe(step, _round(task, reward, lambda a: [a, a]), {})
    assert mon.pop_alerts() == []
    # the math verifier names its extraction path: a round won by "last number" after rounds won otherwise
    math_task = _task("math")
    r = verifiers.Reward.single("math")
    mon = Monitors(MonitorConfig(window=2, category_shift_max=0.25), math_task, r)
    for step in (1, 2):
        mon.observe(step, _round(math_task, r, lambda a: [f"\\boxed{{{a}}}"] * 2), {})
    m = mon.observe(3, _round(math_task, r, lambda a: [f"the sum: 5, 9, and then {a}"] * 2), {})
    assert m["monitor/pass_share/last number"] == 1.0
    assert any("pass_share/last number" in a for a in mon.pop_alerts())


# (count, n, p, P(X >= count) for X ~ Binomial(n, p)), computed by hand
TAILS = [
    (0, 10, 0.3, 1.0),             # nothing to explain
    (1, 1, 0.5, 0.5),
    (2, 2, 0.1, 0.01),             # 0.1^2
    (3, 3, 0.5, 0.125),
    (1, 4, 0.25, 1 - 0.75 ** 4),   # 1 - P(0)
    (5, 5, 0.0, 0.0),              # a share of 0 before cannot produce a count: only smoothing keeps it possible
    (4, 6, 1.0, 1.0),
]


@pytest.mark.parametrize("k,n,p,expected", TAILS)
def test_binomial_tail(k, n, p, expected):
    assert binomial_tail(k, n, p) == pytest.approx(expected, rel=1e-9)


def test_small_rounds_are_quiet_and_large_ones_still_alert():
    """The false alarm a real run with 1-2 passes a round met: a round won by "last number" after rounds won by the
    box is a share of 1.00 against 0.00, but 2 of 2 passes is no evidence; 40 of 40 is. With p_value_max 1 (the
    threshold alone, as before the counts were tested) the small round alerts too."""
    math_task = _task("math")
    r = verifiers.Reward.single("math")

    def alerts(rows, p_value_max=0.01):
        mon = Monitors(MonitorConfig(window=2, category_shift_max=0.25, p_value_max=p_value_max), math_task, r)
        for step in (1, 2):
            mon.observe(step, _round(math_task, r, lambda a: [f"\\boxed{{{a}}}", "no"], rows=rows), {})
        mon.observe(3, _round(math_task, r, lambda a: [f"the sum: 5, 9, and then {a}", "no"], rows=rows), {})
        return [a for a in mon.pop_alerts() if "pass_share/last number" in a]

    assert alerts(rows=2) == []
    assert len(alerts(rows=2, p_value_max=1.0)) == 1
    assert len(alerts(rows=40)) == 1


def test_reward_rising_while_heldout_stays_flat_is_flagged():
    task = _task()
    mon = Monitors(MonitorConfig(window=3, reward_rise_min=0.1), task, verifiers.Reward.single("math"))
    for reward, acc in ((0.5, 0.6), (0.6, 0.6), (0.75, 0.5)):
        mon.since_eval = [reward]
        m = mon.heldout({"eval/accuracy": acc}, 400)
    assert m["monitor/reward_heldout_gap"] == pytest.approx(0.25 + 0.1)
    assert any("reward_heldout_gap" in a for a in mon.pop_alerts())
    # held-out rising with the reward, or falling within the noise of 400 prompts (2 s.e. = 0.07 here): quiet
    for course in (((0.5, 0.6), (0.6, 0.7), (0.75, 0.8)), ((0.5, 0.6), (0.6, 0.6), (0.75, 0.58))):
        quiet = Monitors(MonitorConfig(window=3, reward_rise_min=0.1), task, verifiers.Reward.single("math"))
        for reward, acc in course:
            quiet.since_eval = [reward]
            quiet.heldout({"eval/accuracy": acc}, 400)
        assert quiet.pop_alerts() == []


def test_length_drift_without_outcome_change_is_flagged():
    task = _task()
    r = verifiers.Reward.single("math")
    mon = Monitors(MonitorConfig(window=2, drift_max=0.5), task, r)
    pad = {1: 0, 2: 0, 3: 40}  # characters (one token each) added to every completion: mean length about x3
    for step, length in ((1, 10.0), (2, 10.0), (3, 30.0)):
        m = mon.observe(step, _round(task, r, lambda a: [a + " " * pad[step], "no" + "." * pad[step]]),
                        {"completions/mean_length": length})
    assert m["monitor/length_drift"] == pytest.approx(2.0)
    assert any("length_drift" in a for a in mon.pop_alerts())


def _drift_alerts(rows, p_value_max=0.01):
    """Length alerts after the mean completion length grows from a few tokens to 20 more, pass rate 0.5."""
    task, r = _task(), verifiers.Reward.single("math")
    mon = Monitors(MonitorConfig(window=2, drift_max=0.5, p_value_max=p_value_max), task, r)
    for step, extra in ((1, ""), (2, ""), (3, " " * 20)):
        mon.observe(step, _round(task, r, lambda a: [a + extra, "no"], rows=rows), {})
    return [a for a in mon.pop_alerts() if "length_drift" in a]


def test_length_drift_in_a_small_round_is_no_evidence_and_in_a_large_one_is():
    """Two samples a round (a completion and a two-token refusal): the mean moves by 10 tokens but the spread within
    the round is as large (p = 0.32), so it stays quiet; the same shift over 80 samples a round alerts. With p_value_max 1 (the
    threshold alone) the small round alerts too."""
    assert _drift_alerts(rows=1) == []
    assert len(_drift_alerts(rows=1, p_value_max=1.0)) == 1
    assert len(_drift_alerts(rows=40)) == 1


def test_a_format_term_drifting_in_a_small_round_is_quiet_and_in_a_large_one_alerts():
    """The boxed term's mean goes 0 -> 0.5 while the math pass rate stays 0.5: one boxed completion of two is no
    evidence (p = 0.32), forty of eighty is."""
    task = _task()
    r = verifiers.Reward((verifiers.Term("math"), verifiers.Term("boxed", 0.1)), "math")

    def alerts(rows):
        mon = Monitors(MonitorConfig(window=2, drift_max=0.4), task, r)
        for step, form in ((1, "{}"), (2, "{}"), (3, "\\boxed{{{}}}")):
            m = {"reward/term/boxed": 0.5 if step == 3 else 0.0}
            mon.observe(step, _round(task, r, lambda a: [form.format(a), "no"], rows=rows), m)
        return [a for a in mon.pop_alerts() if "term_drift/boxed" in a]

    assert alerts(rows=1) == []
    assert len(alerts(rows=40)) == 1


# (now, then, p): two rounds' (n, mean, variance); p of a mean shift this large by chance, two-sided normal tail
SHIFTS = [
    ((10, 5.0, 4.0), (10, 5.0, 4.0), 1.0),                 # no shift
    ((100, 6.0, 25.0), (100, 5.0, 25.0), 0.1572992),       # z = 1 / sqrt(0.5) = 1.414
    ((2, 16.0, 392.0), (2, 6.0, 32.0), 0.4922070),         # z = 10 / sqrt(212) = 0.687
    ((5, 3.0, 0.0), (5, 2.0, 0.0), 0.0),                   # two rounds without spread that differ: certain
    ((0, 0.0, 0.0), (5, 2.0, 1.0), 1.0),                   # an empty round: no evidence
]


@pytest.mark.parametrize("now,then,p", SHIFTS)
def test_mean_shift_p(now, then, p):
    assert mean_shift_p(now, then) == pytest.approx(p, rel=1e-6, abs=1e-12)


RUN = ["model.sft_warm_start=false", "model.tiny.num_layers=1", "grpo.steps=2", "grpo.prompts_per_step=4",
       "grpo.group_size=4", "grpo.filter_mixed=false", "eval.size=4", "grpo.train_prompts=16",
       "generation.max_tokens=6", "grpo.verifier_workers=1", "grpo.checkpoint_every=0"]


@pytest.mark.timeout(600)
def test_reverify_flips_nothing_with_the_same_verifiers_and_finds_a_lenient_runs_passes(tmp_path):
    from reasoning_rl.cli.reverify import reverify
    from reasoning_rl.trainers.grpo import train_grpo

    honest = tmp_path / "honest"
    train_grpo(config.load(Config, overrides=RUN + [f"output_dir={honest}"]), log=lambda *_: None)
    task = json.loads((honest / "task.json").read_text())
    assert task["outcome"] == "math" and [t["verifier"] for t in task["terms"]] == ["math", "think_answer"]
    line = json.loads((honest / "archive.jsonl").read_text().splitlines()[0])
    assert line["provenance"]["math"] == {"version": verifiers.get("math").version,
                                          "options_hash": task["terms"][0]["options_hash"]}
    rep = reverify(str(honest))
    assert rep.samples == 32 and sum(rep.flips.values()) == 0

    lenient = tmp_path / "lenient"  # a lenient outcome: rows whose answer appears anywhere pass
    train_grpo(config.load(Config, overrides=RUN + [f"output_dir={lenient}",
                                                    "tasks.reward=[{verifier: contains_answer}]"]), log=lambda *_: None)
    lines = [json.loads(x) for x in (lenient / "archive.jsonl").read_text().splitlines()]
    fakes = [ln for ln in lines if ln["verdicts"]["contains_answer"]["status"] == "correct"
             and verifiers.get("math").verify(ln["text"], ln["task"]["reference"], prompt=ln["prompt"]).status.value
             != "correct"]
    r = subprocess.run([PY, "-m", "reasoning_rl", "reverify", str(lenient), "--verifier", "math"], capture_output=True,
                       text=True, env=run_env(), timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    summary = json.loads((lenient / "reverify" / "summary.json").read_text())
    assert summary["flips"]["pass->fail"] == len(fakes)  # every pass the honest verifier would not give
    assert (lenient / "reverify" / "reward.png").is_file() and (lenient / "reverify" / "flips.jsonl").is_file()
    assert summary["versions"]["math"]["archived_as"] == "contains_answer"
    # pairs from the archive follow the outcome the run recorded (task.json), not the default `math`
    r = subprocess.run([PY, "-m", "reasoning_rl", "pairs", "--archive", str(lenient / "archive.jsonl"), "-o",
                        str(tmp_path / "pairs")], capture_output=True, text=True, env=run_env(), timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["verifier"] == "contains_answer"
    rows = [json.loads(x) for x in (tmp_path / "pairs" / "pairs.jsonl").read_text().splitlines()]
    assert {row["verifier"] for row in rows} <= {"contains_answer"}  # (random weights: few or no mixed groups)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_reward_hacking_demonstration_alerts_on_the_lenient_run_alone(tmp_path):
    """bench/reward_hacking.py, shortened: from the SFT start, GRPO on `contains_answer` raises the second-opinion
    alert; the same run on `math` raises none; reverify with `math` finds the lenient run's false passes, and the
    honest run re-verified with its own verifiers flips nothing."""
    r = subprocess.run([PY, "bench/reward_hacking.py", "--steps", "20", "--out", str(tmp_path)], capture_output=True,
                       text=True, env=run_env(), timeout=1200, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((tmp_path / "summary.json").read_text())
    # the honest run may see a rare legitimate disagreement (`math` accepts "7.0" for 7, `exact` does not): one
    # completion in 64 on one step is below the windowed threshold, so it must not alert
    assert s["honest"]["alerts"] == 0
    assert max(s["honest"]["disagreement"]) < max(s["exploited"]["disagreement"])
    assert s["exploited"]["first_alert_step"] is not None and s["exploited"]["alerts"] > 0
    assert s["reverify_exploited_with_math"]["pass->fail"] > 0
    assert sum(s["reverify_honest_same_verifiers"].values()) == 0


def test_an_alert_fires_once_a_crossing_and_again_after_falling_back():
    task = _task("contains_answer")
    reward = verifiers.Reward.single("contains_answer")
    mon = Monitors(MonitorConfig(second_opinion="exact", disagreement_max=0.2, window=1), task, reward)
    lenient, honest = (lambda a: [a + "0", a]), (lambda a: [a, a])
    fired = []
    for texts in (lenient, lenient, lenient, honest, lenient):
        mon.observe(1, _round(task, reward, texts), {})
        fired.append(len(mon.pop_alerts()))
    assert fired == [1, 0, 0, 0, 1]


def test_a_jump_of_the_tokens_outside_the_ratio_band_alerts_once_and_a_steady_share_does_not():
    """rollout/ratio_outside against its pooled share over the window before: 30 of 1000 tokens a round is steady;
    a round at 200 of 1000 (the engine's weights gone astray) alerts, once; 12 of 60 after 3% is still unlikely
    by chance, 1 of 5 is not."""
    task = _task()
    r = verifiers.Reward.single("math")

    def run(shares, n=1000):
        mon = Monitors(MonitorConfig(window=3), task, r)
        out = []
        for step, k in enumerate(shares, 1):
            m = mon.observe(step, [], {"rollout/ratio_outside": k / n, "rollout/ratio_tokens": float(n)})
            out.append((m.get("monitor/ratio_outside_jump"), mon.pop_alerts()))
        return out

    steady = run([30, 31, 29, 30, 32, 30])
    assert all(not alerts for _, alerts in steady) and steady[3][0] == pytest.approx(0.0, abs=0.005)
    jump = run([30, 31, 29, 200, 210, 30, 30, 30, 220])
    said = [alerts for _, alerts in jump]
    assert said[3] and "200 of 1000 sampled tokens" in said[3][0] and not said[4]  # once a crossing
    assert said[8]  # again after falling back
    assert run([2, 2, 1, 12], n=60)[3][1] and not run([0, 0, 0, 1], n=5)[3][1]


def test_a_rule_terms_broken_share_is_reported_beside_its_score():
    """reward/broken/<verifier> (issue: the share of completions that broke the format verifier's rule): of the samples
    a term other than the outcome scored, those it did not pass; masked verdicts are left out, the outcome has none."""
    import verifiers

    from reasoning_rl.trainers.rounds import round_metrics
    from reasoning_rl.types import Group, Sample, Status, Verdict

    def sample(math_ok, fmt):
        return Sample("x", (1,), (0.0,), verdicts={"math": Verdict(Status.CORRECT if math_ok else Status.INCORRECT,
                                                                   1.0 if math_ok else 0.0), "think_answer": fmt})
    ok, bad, masked = Verdict(Status.CORRECT, 1.0), Verdict(Status.INCORRECT, 0.0), Verdict(Status.ERROR, None)
    g = Group("p", "q", {}, [sample(True, ok), sample(False, bad), sample(True, bad), sample(False, masked)])
    reward = verifiers.Reward((verifiers.Term("math", 1.0), verifiers.Term("think_answer", 0.2)), outcome="math")
    m = round_metrics([g], reward)
    assert m["reward/broken/think_answer"] == 2 / 3 and "reward/broken/math" not in m
