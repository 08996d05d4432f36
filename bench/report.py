"""`reasoning-rl report` on a large run: time to open the page and to filter it, in headless chromium.

    .venv/bin/python bench/report.py [--samples 100000] [--baseline 1000] [--out /tmp/report-bench]

Writes two synthetic run directories with the project's own writers (`write_groups`, one metrics line per round):
one of `--samples` samples and a baseline of `--baseline`, with texts, verdicts and paths of the shapes real runs
have. For each: the seconds to build the HTML, the page's load (navigation start to the first table on screen) and
one filter (a status, then free text) as the page measures them, and the ratio of the large run's to the baseline's
(these machines are noisy: read the ratio). Goal (issue): a 100,000-sample run opens in under 5 s and filters in
under 1 s on this machine. Not a test: timings are never asserted.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def make_run(path: str, n: int, seed: int = 0) -> None:
    from reasoning_rl.data.archive import write_groups
    from reasoning_rl.types import Group, Sample, Status, Verdict

    os.makedirs(path, exist_ok=True)
    rng = random.Random(seed)
    g_size, per_round = 8, 256
    rounds = max(1, n // per_round)
    task = {"source": "synthetic", "outcome": "math", "checked": "completion",
            "terms": [{"verifier": "math", "weight": 1.0, "options": {}, "version": "2", "options_hash": "0"}]}
    with open(os.path.join(path, "task.json"), "w") as f:
        json.dump(task, f)
    with open(os.path.join(path, "archive.jsonl"), "w") as af, open(os.path.join(path, "metrics.jsonl"), "w") as mf:
        for step in range(1, rounds + 1):
            groups = []
            for p in range(per_round // g_size):
                a, b = rng.randint(10, 99), rng.randint(10, 99)
                samples = []
                for _ in range(g_size):
                    guess = a + b + rng.choice([0, 0, 1, -1, 10])
                    form = rng.choice(["The answer is \\boxed{%d}." % guess, "%d + %d = %d\nSo %d." % (a, b, guess, guess),
                                       "Let me add %d and %d. The total is %d" % (a, b, guess)])
                    ok = guess == a + b
                    v = Verdict(Status.CORRECT if ok else Status.INCORRECT, float(ok),
                                f"'{guess}' (boxed) {'==' if ok else '!='} '{a + b}'")
                    samples.append(Sample(form, tuple(range(len(form) // 3)), finish_reason=rng.choice(["stop"] * 9 + ["length"]),
                                          verdicts={"math": v}))
                groups.append(Group(f"add-{step}-{p}", f"What is {a} + {b}?", {"reference": str(a + b)}, samples))
            write_groups(af, groups, step)
            mf.write(json.dumps({"step": step, "reward/mean": rng.random(), "kl": rng.random() / 100,
                                 "time/rollout": rng.random() * 10, "time/update": rng.random() * 5}) + "\n")


def measure(html: str) -> dict:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from tests.test_report import _browser  # the tests' headless chromium, with the same flags

    d = _browser()
    try:
        t = time.time()
        d.get("file://" + html)
        d.find_element(By.ID, "tab-rollouts").click()
        load = d.execute_script("return performance.now() / 1000")  # navigation start to now, in the page's clock
        wall = time.time() - t
        t0 = d.execute_script("return performance.now()")
        Select(d.find_element(By.ID, "f-status")).select_by_value("correct")
        t1 = d.execute_script("return performance.now()")
        d.find_element(By.ID, "f-text").send_keys("boxed")
        t2 = d.execute_script("return performance.now()")
        count = d.find_element(By.ID, "count").text
    finally:
        d.quit()
    return {"load_s": round(load, 3), "load_wall_s": round(wall, 3), "filter_status_s": round((t1 - t0) / 1000, 3),
            "filter_text_s": round((t2 - t1) / 1000, 3), "count": count}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--baseline", type=int, default=1000)
    ap.add_argument("--out", default="/tmp/report-bench")
    a = ap.parse_args()
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    from reasoning_rl.cli.report import write_report

    res = {}
    for name, n in (("baseline", a.baseline), ("large", a.samples)):
        d = os.path.join(a.out, name)
        make_run(d, n)
        t = time.time()
        rep = write_report(d)
        res[name] = {"samples": len(rep.samples), "build_s": round(time.time() - t, 2),
                     "html_mb": round(os.path.getsize(rep.run["written"]) / 1e6, 1), **measure(rep.run["written"])}
        print(name, json.dumps(res[name]), flush=True)
    b, big = res["baseline"], res["large"]
    print(f"ratios large/baseline: load {big['load_s'] / b['load_s']:.1f}x, status filter "
          f"{big['filter_status_s'] / max(1e-3, b['filter_status_s']):.1f}x, text filter "
          f"{big['filter_text_s'] / max(1e-3, b['filter_text_s']):.1f}x ({big['samples']} vs {b['samples']} samples)")


if __name__ == "__main__":
    main()
