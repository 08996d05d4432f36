"""Curricula: filters on the binary outcome, refill, the SQLite ledger, and the samplers."""
import multiprocessing as mp
import random
import signal
import subprocess
import sys

import pytest

from curricula import FILTERS, Ledger, MixedBandSampler, UniformSampler, apply_filters, fill_batch, group_stats
from curricula.signal import p_mixed
from reasoning_rl.types import Group, Sample, Status, Verdict

C, I, T, E = Verdict.correct(), Verdict.incorrect(), Verdict.masked_as(Status.TIMEOUT), Verdict.masked_as(Status.ERROR)


def group(pid, outcomes, fmt=None, truncated=()):
    samples = []
    for k, o in enumerate(outcomes):
        v = {"math": o}
        if fmt is not None:
            v["think_answer"] = fmt[k]
        samples.append(Sample(f"s{k}", verdicts=v, finish_reason="length" if k in truncated else "stop"))
    return Group(pid, "q", {"answer": "1"}, samples)


def test_outcome_all_correct_but_composite_mixed_is_dropped():
    # every answer right; the format bonus differs, so a composite reward would look mixed
    g = group("p", [C, C, C, C], fmt=[C, I, C, I])
    composite = lambda s: s.verdicts["math"].score + 0.5 * s.verdicts["think_answer"].score  # noqa: E731
    assert len({composite(s) for s in g.samples}) == 2  # mixed under the composite...
    kept, reasons = apply_filters([g], "math", ["mixed"])
    assert kept == [] and reasons == {"mixed: all pass": 1}  # ...dropped on the outcome
    stats = group_stats([g], "math", reward=composite)
    assert stats["groups/pct_all_pass"] == 1.0 and stats["frac_reward_zero_std"] == 0.0


# (outcomes, kept by `mixed`?) -- masked samples never make a group mixed
MIXED = [
    ([C, I], True),
    ([C, T], False),  # one pass + a timeout: no scored fail
    ([I, E, T], False),
    ([T, E], False),
    ([C, I, T, E], True),
]


@pytest.mark.parametrize("outcomes,kept", MIXED)
def test_masked_samples_never_make_a_group_mixed(outcomes, kept):
    assert bool(apply_filters([group("p", outcomes)], "math", ["mixed"])[0]) is kept


def test_min_scored_truncation_and_length_filters():
    g = group("p", [C, I, T, T])
    assert not apply_filters([g], "math", ["min_scored"], min_scored=3)[0]
    assert apply_filters([g], "math", ["min_scored"], min_scored=2)[0]
    t = group("p", [C, I, C, I], truncated=(0, 1, 2))
    assert not apply_filters([t], "math", ["max_truncated"], max_truncated_frac=0.5)[0]
    assert apply_filters([group("p", [C, I])], "math", ["max_length"], max_mean_tokens=10)[0]
    assert "mixed" in FILTERS and "max_length" in FILTERS


def test_group_stats_fractions():
    gs = [group("a", [C, I]), group("b", [C, C]), group("c", [I, I]), group("d", [T, E])]
    s = group_stats(gs, "math")
    assert (s["groups/pct_mixed"], s["groups/pct_all_pass"], s["groups/pct_all_fail"], s["groups/pct_unscored"]) == \
        (0.25, 0.25, 0.25, 0.25)
    assert s["frac_reward_zero_std"] == 0.75


# ---------------------------------------------------------------- refill
def _stream(pass_rates, G=4, seed=0):
    rng = random.Random(seed)
    it = iter(range(10**9))

    def draw(k):
        return [f"p{next(it)}" for _ in range(k)]

    def generate(prompts):
        out = []
        for pid in prompts:
            p = pass_rates[int(pid[1:]) % len(pass_rates)]
            out.append(group(pid, [C if rng.random() < p else I for _ in range(G)]))
        return out

    return draw, generate


def test_refill_fills_the_batch_from_a_stream():
    draw, gen = _stream([0.5])  # P(mixed) = 1 - 2 * 0.5^4 = 0.875
    kept, st = fill_batch(draw, gen, lambda g: g.is_mixed("math"), batch_size=32, max_extra_rounds=5)
    assert len(kept) == 32 and st.full and st.extra_generation_rounds >= 1
    assert all(g.is_mixed("math") for g in kept)
    assert st.metrics()["curriculum/yield"] == pytest.approx(32 / st.generated_groups)


def test_refill_stops_at_its_round_limit():
    draw, gen = _stream([1.0])  # never mixed
    kept, st = fill_batch(draw, gen, lambda g: g.is_mixed("math"), batch_size=8, max_extra_rounds=3)
    assert kept == [] and not st.full
    assert st.extra_generation_rounds == 3 and st.generated_groups == 8 * 4


def test_refill_yield_matches_the_known_pass_rate():
    draw, gen = _stream([0.5, 1.0])  # half the prompts can be mixed (0.875), half never
    _, st = fill_batch(draw, gen, lambda g: g.is_mixed("math"), batch_size=400, max_extra_rounds=50)
    assert st.yield_ == pytest.approx(0.5 * p_mixed(0.5, 4), abs=0.06)


# ---------------------------------------------------------------- ledger
def test_ledger_counts_ema_streak_and_retirement(tmp_path):
    with Ledger(tmp_path / "l.sqlite", ema_alpha=0.5) as led:
        led.update([group("a", [C, I, T, C])], "math", step=1, retire_after=2)  # 2/3 scored pass
        e = led.get("a")
        assert (e.attempts, e.passes, e.streak, e.last_step) == (3, 2, 0, 1) and e.ema == pytest.approx(2 / 3)
        led.update([group("a", [C, C])], "math", step=2, retire_after=2)
        led.update([group("a", [C, C])], "math", step=3, retire_after=2)
        e = led.get("a")
        assert e.retired and e.streak == 2 and e.retired_at == 3 and e.ema == pytest.approx(0.5 * (0.5 * 2 / 3 + 0.5) + 0.5)
        assert led.retired_count() == 1
        assert led.revive(step=4, after_steps=5) == 0
        assert led.revive(step=8, after_steps=5) == 1 and not led.get("a").retired
        led.update([group("b", [T, E])], "math", step=9)  # no scored sample: not an attempt
        assert led.get("b") is None
    with Ledger(tmp_path / "l.sqlite") as again:  # survives reopening
        assert again.get("a").attempts == 7


def _writer(path, wid, n):
    with Ledger(path) as led:
        for k in range(n):
            led.update([group(f"w{wid}", [C, I]), group("shared", [C])], "math", step=k)


@pytest.mark.timeout(120)
def test_ledger_concurrent_writers(tmp_path):
    path = str(tmp_path / "l.sqlite")
    Ledger(path).close()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, w, 50)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with Ledger(path) as led:
        assert led.get("shared").attempts == 200 and led.get("shared").passes == 200
        assert all(led.get(f"w{w}").attempts == 100 for w in range(4))


KILL_SCRIPT = """
import os, signal, sys
sys.path.insert(0, {root!r})
from curricula import Ledger
from reasoning_rl.types import Group, Sample, Verdict


class DiesHalfWay:
    # the real sqlite3 connection, but the process is SIGKILLed at the 1000th statement of the update
    def __init__(self, conn):
        self.conn, self.n = conn, 0

    def execute(self, sql, *args):
        self.n += 1
        if self.n == 1000:
            os.kill(os.getpid(), signal.SIGKILL)
        return self.conn.execute(sql, *args)

    def __enter__(self):
        return self.conn.__enter__()

    def __exit__(self, *exc):
        return self.conn.__exit__(*exc)


led = Ledger({path!r})
led.conn = DiesHalfWay(led.conn)
groups = [Group(f"p{{i}}", "q", {{}}, [Sample("x", verdicts={{"math": Verdict.correct()}})]) for i in range(2000)]
led.update(groups, "math", step=1)
"""


@pytest.mark.timeout(120)
def test_ledger_survives_a_kill_mid_write(tmp_path, root):
    path = str(tmp_path / "l.sqlite")
    with Ledger(path) as led:
        led.update([group("p0", [C, I])], "math", step=0)
    r = subprocess.run([sys.executable, "-c", KILL_SCRIPT.format(root=str(root), path=path)], timeout=60)
    assert r.returncode == -signal.SIGKILL
    with Ledger(path) as led:
        assert led.get("p0").attempts == 2  # the earlier update is intact
        assert led.get("p1") is None  # none of the killed update's rows landed
        led.update([group("p1", [C])], "math", step=2)  # and the file is usable
        assert led.get("p1").attempts == 1


# ---------------------------------------------------------------- samplers
def test_sampler_empirical_distribution_matches_weights(tmp_path):
    with Ledger(tmp_path / "l.sqlite") as led:
        ids = [f"p{i}" for i in range(6)]
        for i, pid in enumerate(ids[:5]):  # known pass rates 0, .25, .5, .75, 1 over 40 attempts; p5 unseen
            led.update([group(pid, [C] * (10 * i) + [I] * (40 - 10 * i))], "math", step=0)
        s = MixedBandSampler(ids, G=8, seed=0, ledger=led)
        probs = s.probabilities()
        n = 60000
        draws = s.sample(n, replace=True)
        for pid in ids:
            emp = draws.count(pid) / n
            assert emp == pytest.approx(probs[pid], abs=4 * (probs[pid] * (1 - probs[pid]) / n) ** 0.5 + 1e-3)
        w = s.weights()
        assert w["p2"] > w["p1"] > w["p0"] and w["p2"] > w["p3"] > w["p4"]  # the mixed band is favoured
        assert w["p5"] == pytest.approx(p_mixed(0.5, 8))  # unseen: the prior


def test_samplers_are_deterministic_and_skip_retired(tmp_path):
    ids = [f"p{i}" for i in range(50)]
    assert UniformSampler(ids, seed=3).sample(10) == UniformSampler(ids, seed=3).sample(10)
    assert UniformSampler(ids, seed=3).sample(10) != UniformSampler(ids, seed=4).sample(10)
    assert len(set(UniformSampler(ids, seed=1).sample(50))) == 50  # without replacement
    with Ledger(tmp_path / "l.sqlite") as led:
        for step in range(3):
            led.update([group("p0", [C, C])], "math", step=step, retire_after=3)
        assert "p0" not in UniformSampler(ids, seed=0, ledger=led).sample(50)
        assert MixedBandSampler(ids, G=4, ledger=led).weights()["p0"] == 0.0
    with pytest.raises(ValueError, match="G must be >= 2"):
        MixedBandSampler(ids, G=1)


def test_refill_stops_at_its_time_budget_too():
    draw, gen = _stream([1.0])  # never mixed: only a limit stops it
    ticks = iter(range(0, 1000, 10))  # each look at the clock 10 s later
    kept, st = fill_batch(draw, gen, lambda g: g.is_mixed("math"), batch_size=8, max_extra_rounds=100,
                          max_seconds=25, clock=lambda: next(ticks))
    assert kept == [] and st.extra_generation_rounds == 2  # t = 10 after round 0, 20 after 1, 30 >= 25 after 2


# ---------------------------------------------------------------- easy first
def _ledger_with(tmp_path, passes: dict[str, tuple[int, int]]):
    """A ledger where prompt p had passes[p] = (passed, failed) outcomes."""
    led = Ledger(str(tmp_path / "ledger.sqlite"))
    led.update([group(p, [C] * ok + [I] * bad) for p, (ok, bad) in passes.items()], "math", step=1)
    return led


def test_easy_first_draws_from_the_easiest_and_doubles_its_window_as_they_are_passed(tmp_path):
    from curricula import EasyFirstSampler

    ids = [f"p{i:02d}" for i in range(40)]
    difficulty = {p: float(40 - i) for i, p in enumerate(ids)}  # p39 is the easiest
    easiest = sorted(ids, key=lambda p: difficulty[p])
    s = EasyFirstSampler(ids, G=4, difficulty=difficulty, start=0.1, widen_at=0.5)
    assert s.window() == 4 and set(s.sample(4)) == set(easiest[:4])  # 10% of 40, only they are drawn
    # seen, but passed at 25%: no wider
    s.ledger = _ledger_with(tmp_path / "a", {p: (1, 3) for p in easiest[:4]})
    assert s.window() == 4
    # passed at 75%: twice as wide; not again until the new ones have their attempts too
    s.ledger = _ledger_with(tmp_path / "b", {p: (3, 1) for p in easiest[:4]})
    assert s.window() == 8 and set(s.sample(8)) == set(easiest[:8])
    s.ledger = _ledger_with(tmp_path / "c", {p: (3, 1) for p in easiest[:8]})
    assert s.window() == 16
    s.ledger = _ledger_with(tmp_path / "d", {p: (4, 0) for p in ids})
    assert s.window() == 40  # everything passed: the whole set, never beyond
    again = EasyFirstSampler(ids, G=4, difficulty=difficulty, start=0.1, widen_at=0.5, ledger=s.ledger)
    assert again.window() == 40  # from the ledger alone: a resumed run draws the same window


def test_a_tasks_difficulty_is_its_solutions_steps_or_a_column(tmp_path):
    from reasoning_rl import config
    from reasoning_rl.config import Config
    from reasoning_rl.errors import UserError
    from reasoning_rl.task.task import Task

    from .helpers.hf_model import write_jsonl

    rows = [{"question": "one step?", "answer": "3+4=<<3+4=7>>7\n#### 7", "level": 2},
            {"question": "three steps?", "answer": "a\nb\nc\n#### 9", "level": 1}] * 1
    rows += [{"question": f"filler {i}?", "answer": f"x\n#### {i}", "level": 5} for i in range(40)]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    task = Task.from_config(config.load(Config, overrides=[f"tasks.source={data}", "tasks.preset=gsm8k",
                                                           "tasks.test_split=train"]).tasks)
    d = task.difficulty(task.train)
    by_q = {r["raw"]: d[r["prompt_id"]] for r in task.train}
    assert by_q["one step?"] == 1.0 and by_q["three steps?"] == 3.0
    task = Task.from_config(config.load(Config, overrides=[f"tasks.source={data}", "tasks.preset=gsm8k",
                                                           "tasks.test_split=train", "tasks.difficulty_col=level"]).tasks)
    d = task.difficulty(task.train)
    assert {r["raw"]: d[r["prompt_id"]] for r in task.train}["three steps?"] == 1.0
    task = Task.from_config(config.load(Config, overrides=[f"tasks.source={data}", "tasks.preset=gsm8k",
                                                           "tasks.test_split=train", "tasks.difficulty_col=nope"]).tasks)
    with pytest.raises(UserError, match="tasks.difficulty_col: .* row 0 has no number in column 'nope'"):
        task.difficulty(task.train)


def test_a_run_with_the_easy_first_sampler_draws_from_its_window(tmp_path):
    import json

    from reasoning_rl import config
    from reasoning_rl.config import Config
    from reasoning_rl.trainers.grpo import train_grpo

    cfg = config.load(Config, overrides=["model.sft_warm_start=false", "model.tiny.num_layers=1", "grpo.steps=2",
                                         "grpo.prompts_per_step=4", "grpo.group_size=4", "grpo.sampler=easy_first",
                                         "grpo.easy_start=0.02", "grpo.train_prompts=200", "grpo.eval_every=0",
                                         "grpo.eval_at_start=false", "grpo.eval_at_end=false", "grpo.max_refill_rounds=0",
                                         "grpo.verifier_workers=1", "generation.max_tokens=4",
                                         "grpo.checkpoint_every=0", "tasks.difficulty=prompt_length",
                                         f"output_dir={tmp_path}"])
    train_grpo(cfg, log=lambda *_: None)
    from reasoning_rl.task.task import Task

    task = Task.from_config(cfg.tasks)
    rows = task.train[:200]
    d = task.difficulty(rows)
    window = set(sorted(d, key=lambda p: (d[p], p))[:4])  # 2% of 200
    drawn = {json.loads(x)["prompt_id"] for x in (tmp_path / "archive.jsonl").read_text().splitlines()}
    assert drawn and drawn <= window
