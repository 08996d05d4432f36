"""The reward-hacking monitors replayed over finished runs: how many alerts each setting raises, and when.

    .venv/bin/python bench/monitor_alarms.py RUN_DIR [RUN_DIR ...] [--second-opinion exact] [--window 4]
        [--disagreement-max 0.2] [--p-value-max 1 0.01]
    .venv/bin/python bench/monitor_alarms.py --fixture tests/fixtures/smollm2_word_problems.jsonl

--fixture: the honest real-model run kept as the labelled corpus (SmolLM2-135M-Instruct, 24 rounds of 4 prompts
x 8 samples; each row's id is step/prompt/index) is rebuilt into a run directory (the `math` verifier's verdicts
now, lengths counted by the model's tokenizer) and replayed like any other run.

Each run's rounds are rebuilt from its `archive.jsonl` (every verified sample, by step) and `metrics.jsonl`
(the round's mean length, reward and terms), and fed to `Monitors.observe` in order, once per `--p-value-max`
(1 = the threshold alone, as the monitors were before they tested counts; 0.01 = the default). Prints, per run
and setting, the alerts raised, the step of the first, and the passes a round had (the sample size the alerts
stood on). The second opinion, when named, re-verifies the same sampled passes as during the run would.

This is a replay, not a new run: the second opinion's sample of passes is drawn again (same seed, same order),
so it matches a live run's only where the live run had the same monitor settings. Held-out evaluations are not
replayed (the reward vs held-out monitor already carries its own noise model).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ArchivedTask:
    """What `Monitors` asks of a task: re-verify (group, sample) pairs against the archived rows' references."""

    def __init__(self, checked: str) -> None:
        self.checked = checked

    def verify_samples(self, reward, flat, pool=None):
        from reasoning_rl.task.task import checked_text

        texts = [checked_text(self.checked, g.row.get("raw", ""), s.text) for g, s in flat]
        return reward.verify(texts, [g.row["reference"] for g, _ in flat], [g.prompt for g, _ in flat], pool=pool)


def rounds(run_dir: str):
    """(step, groups, metrics) of every round in the run, in order."""
    from reasoning_rl.data.archive import read_archive_rounds

    path = os.path.join(run_dir, "archive.jsonl")
    by_step = read_archive_rounds(path)
    # the archive keeps a completion's token count, not its ids; the length monitor needs only their number
    n_tokens = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                n_tokens[(int(r["step"]), str(r["prompt_id"]), int(r.get("index", 0)))] = int(r.get("n_tokens", 0))
    by_step = {step: [dataclasses.replace(g, samples=[dataclasses.replace(s, token_ids=(0,) * n_tokens[(step,
                                                                                                         g.prompt_id, i)])
                                                      for i, s in enumerate(g.samples)]) for g in groups]
               for step, groups in by_step.items()}
    metrics = {}
    with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as f:
        for line in f:
            if line.strip():
                m = json.loads(line)
                metrics[m["step"]] = m
    return [(step, by_step[step], metrics.get(step, {})) for step in sorted(by_step)]


def replay(run_dir: str, p_value_max: float, second_opinion: str, window: int, disagreement_max: float,
           pool=None) -> dict:
    import verifiers
    from reasoning_rl.config.sections import MonitorConfig
    from reasoning_rl.trainers.monitors import Monitors

    task = json.load(open(os.path.join(run_dir, "task.json")))
    reward = verifiers.Reward([verifiers.Term(t["verifier"], t["weight"], t["options"]) for t in task["terms"]],
                              outcome=task["outcome"])
    cfg = MonitorConfig(second_opinion=second_opinion, window=window, disagreement_max=disagreement_max,
                        sample=64, p_value_max=p_value_max)
    mon = Monitors(cfg, ArchivedTask(task.get("checked", "completion")), reward)
    alerts, passes = [], []
    for step, groups, m in rounds(run_dir):
        mon.observe(step, groups, m, pool)
        passes.append(sum(bool(s.outcome(reward.outcome)) for g in groups for s in g.samples))
        alerts += [(step, a) for a in mon.pop_alerts()]
    return {"rounds": len(passes), "alerts": len(alerts), "first_alert_step": alerts[0][0] if alerts else None,
            "passes_per_round": {"min": min(passes), "mean": round(sum(passes) / len(passes), 1),
                                 "max": max(passes)},
            "alerts_by_monitor": dict(_count(a.split(":")[0] for _, a in alerts)), "examples": alerts[:3]}


def fixture_run(path: str, out: str) -> str:
    """A run directory (archive, metrics, task.json) rebuilt from the labelled real-model corpus."""
    import verifiers
    from transformers import AutoTokenizer

    from reasoning_rl.models.sources import resolve

    rows = [json.loads(x) for x in open(path, encoding="utf-8") if x.strip()]
    tok = AutoTokenizer.from_pretrained(resolve("smollm2-135m-instruct", log=lambda *_: None))
    reward = verifiers.Reward.single("math")
    verdicts = reward.verify([r["prediction"] for r in rows], [r["gold"] for r in rows], [r["prompt"] for r in rows])
    os.makedirs(out, exist_ok=True)
    by_step = defaultdict(list)
    with open(os.path.join(out, "archive.jsonl"), "w", encoding="utf-8") as f:
        for r, v in zip(rows, verdicts):
            step, pid, index = r["id"].split("/")
            n = len(tok(r["prediction"], add_special_tokens=False)["input_ids"])
            by_step[int(step)].append(n)
            f.write(json.dumps({"step": int(step), "prompt_id": pid, "prompt": r["prompt"], "index": int(index),
                                "task": {"reference": r["gold"]}, "text": r["prediction"], "n_tokens": n,
                                "finish_reason": r["finish_reason"],
                                "verdicts": {k: {"status": x.status.value, "score": x.score, "detail": x.detail}
                                             for k, x in v.items()}}) + "\n")
    with open(os.path.join(out, "metrics.jsonl"), "w", encoding="utf-8") as f:
        for step, ns in sorted(by_step.items()):
            f.write(json.dumps({"step": step, "completions/mean_length": sum(ns) / len(ns)}) + "\n")
    with open(os.path.join(out, "task.json"), "w", encoding="utf-8") as f:
        json.dump({"terms": [{"verifier": "math", "weight": 1.0, "options": {}}], "outcome": "math",
                   "checked": "completion"}, f)
    return out


def _count(xs):
    out = defaultdict(int)
    for x in xs:
        out[x] += 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="*")
    ap.add_argument("--fixture", default="", help="replay the labelled real-model corpus (rebuilt into a temporary "
                                                  "run directory) besides any RUN_DIR")
    ap.add_argument("--second-opinion", default="")
    ap.add_argument("--window", type=int, default=4)
    ap.add_argument("--disagreement-max", type=float, default=0.2)
    ap.add_argument("--p-value-max", type=float, nargs="+", default=[1.0, 0.01])
    a = ap.parse_args()
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    import verifiers

    out = {}
    if a.fixture:
        import tempfile

        a.runs.append(fixture_run(a.fixture, os.path.join(tempfile.mkdtemp(prefix="monitor-fixture-"), "run")))
    with verifiers.VerifierPool(num_workers=2) as pool:
        for run in a.runs:
            for p in a.p_value_max:
                got = replay(run, p, a.second_opinion, a.window, a.disagreement_max, pool)
                out[f"{run} p_value_max={p}"] = got
                print(f"{run}  p_value_max={p}: {got['alerts']} alerts in {got['rounds']} rounds (first at step "
                      f"{got['first_alert_step']}; passes a round {got['passes_per_round']}) "
                      f"{got['alerts_by_monitor']}", flush=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
