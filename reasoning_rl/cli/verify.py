"""The verifier subcommands: `verify`, `verifiers calibrate`, `verifiers probe`.

Torch-free: they use only the `verifiers` package and the standard library (plus
`datasets` when a dataset directory or Parquet file is given).
"""
from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict

from ..errors import UserError
from ..task.sources import read_rows  # noqa: F401 - the commands' one reader (cli/train.py imports it from here)


def _need(rows: list[dict], col: str, path: str) -> None:
    if not rows:
        raise UserError(f"{path}: no rows")
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise UserError(f"{path}: row {i} is not an object: {str(r)[:60]!r}")
        if col not in r:
            raise UserError(f"{path}: row {i} has no column {col!r} (columns: {sorted(r)})")


def cmd_verify(args) -> int:
    import verifiers
    from verifiers import Reward, Term

    names = args.verifier or ["math"]
    for n in names:
        verifiers.get(n)  # an unknown name: one line listing the valid ones, before reading anything
    rows = read_rows(args.input)
    _need(rows, args.completion_col, args.input)
    _need(rows, args.reference_col, args.input)
    reward = Reward(tuple(Term(n, 1.0 if i == 0 else 0.0) for i, n in enumerate(names)), outcome=names[0])
    with verifiers.VerifierPool(num_workers=args.workers, timeout=args.timeout) as pool:
        verdicts = reward.verify([str(r[args.completion_col]) for r in rows], [r[args.reference_col] for r in rows],
                                 pool=pool)
        metrics = pool.metrics()
    out = sys.stdout if args.output in (None, "-") else open(args.output, "w", encoding="utf-8")
    try:
        for r, vs in zip(rows, verdicts):
            r = dict(r)
            for n, v in vs.items():
                r[f"{n}_status"], r[f"{n}_score"], r[f"{n}_detail"] = v.status.value, v.score, v.detail
            print(json.dumps(r, ensure_ascii=False), file=out)
    finally:
        if out is not sys.stdout:
            out.close()
    for n in names:
        counts = Counter(vs[n].status.value for vs in verdicts)
        scored = [vs[n].score for vs in verdicts if vs[n].score is not None]
        mean = sum(scored) / len(scored) if scored else float("nan")
        print(f"{n}: {len(rows)} rows  " + "  ".join(f"{k} {v}" for k, v in sorted(counts.items())) +
              f"  mean score {mean:.4f} over {len(scored)} scored  "
              f"p50 {metrics.get(f'verifier/{n}/latency_p50_ms', 0):.1f} ms", file=sys.stderr)
    return 0


def _rates(pairs: list[tuple[bool, bool]]) -> dict:
    tp = sum(1 for y, p in pairs if y and p)
    tn = sum(1 for y, p in pairs if not y and not p)
    fp = sum(1 for y, p in pairs if not y and p)
    fn = sum(1 for y, p in pairs if y and not p)
    n = len(pairs)
    return {"n": n, "accuracy": (tp + tn) / n if n else float("nan"),
            "fpr": fp / (fp + tn) if fp + tn else float("nan"), "fnr": fn / (fn + tp) if fn + tp else float("nan"),
            "fp": fp, "fn": fn}


def cmd_calibrate(args) -> int:
    import verifiers
    from verifiers.base import wants_prompt, wants_truncation
    from ..types import Status

    names = args.verifier or ["math"]
    for n in names:
        verifiers.get(n)
    rows = read_rows(args.gold)
    for col in (args.gold_col, args.pred_col, args.label_col):
        _need(rows, col, args.gold)
    judged: dict[str, list] = {}
    reference = None if args.no_math_verify or "math_verify" in names else "math_verify"
    with verifiers.VerifierPool(num_workers=args.workers, timeout=args.timeout) as pool:
        for n in names + ([reference] if reference else []):
            asks = wants_prompt(verifiers.get(n)) and all(args.prompt_col in r for r in rows)
            cut = wants_truncation(verifiers.get(n))  # a row's finish_reason "length": cut at the token limit
            judged[n] = pool.run([verifiers.Call(n, str(r[args.pred_col]), r[args.gold_col],
                                                 {**({"prompt": str(r[args.prompt_col])} if asks else {}),
                                                  **({"truncated": True} if cut and r.get("finish_reason") == "length"
                                                     else {})}) for r in rows])
    report = {}
    for n in names:
        pairs = [(bool(r[args.label_col]), v.status is Status.CORRECT) for r, v in zip(rows, judged[n])]
        tot = _rates(pairs)
        masked = sum(v.masked for v in judged[n])
        mv = judged.get("math_verify")
        agree = "" if mv is None or n == "math_verify" else "  agreement with math_verify {:.1f}%".format(
            100 * sum((a.status is Status.CORRECT) == (b.status is Status.CORRECT) for a, b in zip(judged[n], mv))
            / max(1, len(rows)))
        print(f"{n}: n={tot['n']}  accuracy {100 * tot['accuracy']:.1f}%  false positives {100 * tot['fpr']:.1f}% "
              f"({tot['fp']})  false negatives {100 * tot['fnr']:.1f}% ({tot['fn']})  masked {masked}{agree}")
        cats = defaultdict(list)
        for r, pr in zip(rows, pairs):
            cats[str(r.get(args.category_col, "-"))].append(pr)
        for c in sorted(cats, key=lambda k: -len(cats[k])):
            s = _rates(cats[c])
            print(f"    {c:<24} n={s['n']:<4} acc {100 * s['accuracy']:5.1f}%  fp {s['fp']:<3} fn {s['fn']}")
        report[n] = {"summary": tot, "per_category": {c: _rates(v) for c, v in cats.items()}}
    if len(names) >= 2:
        a, b = names[:2]
        dis = [(r, va, vb) for r, va, vb in zip(rows, judged[a], judged[b])
               if (va.status is Status.CORRECT) != (vb.status is Status.CORRECT)]
        print(f"disagreements {a} vs {b}: {len(dis)}")
        for r, va, vb in dis[: args.show]:
            print(f"    gold={str(r[args.gold_col])[:50]!r} pred={str(r[args.pred_col])[:60]!r} "
                  f"label={r[args.label_col]} {a}={va.status.value} {b}={vb.status.value}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


def cmd_probe(args) -> int:
    import verifiers
    from verifiers.probes import run_probes

    verifiers.get(args.name)
    results = run_probes(args.name, budget=args.budget)
    for r in results:
        flag = "FAIL" if r.failed else "ok"
        print(f"{flag:4} {r.probe.name:34} {r.status.value:12} {r.seconds:6.2f}s  {r.detail[:70]}")
    failed = [r for r in results if r.failed]
    if failed:
        print(f"{len(failed)} of {len(results)} probes FAILED for verifier {args.name!r}: "
              + ", ".join(r.probe.name for r in failed), file=sys.stderr)
        return 1
    print(f"all {len(results)} probes passed for verifier {args.name!r}")
    return 0


def add_parsers(sub, vsub, cmd, pos_int, pos_float) -> None:
    """The verifier subcommands, built with the main parser's `cmd` helper and range types."""
    p = cmd(sub, "verify", "score a JSONL / JSON / CSV / Parquet / datasets file of completions with verifiers",
            "reasoning-rl verify completions.jsonl --verifier math --verifier boxed -o scored.jsonl")
    p.add_argument("input", help="JSONL, JSON list, CSV, Parquet, or a datasets directory")
    p.add_argument("--verifier", action="append", help="verifier name (repeatable; the first is the outcome; "
                                                       "default: math)")
    p.add_argument("--completion-col", default="completion", help="the column holding the model's output")
    p.add_argument("--reference-col", default="answer", help="the column holding the reference")
    p.add_argument("--output", "-o", help="JSONL with verdict columns added (default: stdout)")
    p.add_argument("--workers", type=pos_int, default=None, help="worker processes (default: cores)")
    p.add_argument("--timeout", type=pos_float, default=None, help="seconds per call (default: each verifier's)")
    p.set_defaults(func=cmd_verify)

    q = cmd(vsub, "calibrate", "accuracy, false-positive/negative rates and disagreements on a labelled file",
            "reasoning-rl verifiers calibrate --gold labelled.jsonl --verifier math --verifier math_verify")
    q.add_argument("--gold", required=True, help="labelled file: gold, prediction, equivalent (+ category; a "
                                                 "finish_reason of 'length' tells the verifiers the text was cut)")
    q.add_argument("--verifier", action="append",
                   help="verifier name (repeatable; two or more show disagreements; default: math)")
    q.add_argument("--gold-col", default="gold", help="the column holding the gold answer")
    q.add_argument("--pred-col", default="prediction", help="the column holding the prediction")
    q.add_argument("--label-col", default="equivalent", help="the column holding the true/false label")
    q.add_argument("--category-col", default="category", help="the column to break the report down by")
    q.add_argument("--prompt-col", default="prompt", help="the column holding the question, where there is one: "
                                                          "verifiers that read the prompt (math, math_verify) get it")
    q.add_argument("--show", type=int, default=20, help="disagreements to print")
    q.add_argument("--json", help="also write the report here")
    q.add_argument("--no-math-verify", action="store_true",
                   help="skip math-verify's verdicts (by default each verifier's agreement with them is printed)")
    q.add_argument("--workers", type=pos_int, default=None, help="worker processes (default: cores)")
    q.add_argument("--timeout", type=pos_float, default=None, help="seconds per call (default: each verifier's)")
    q.set_defaults(func=cmd_calibrate)

    q = cmd(vsub, "probe", "run the adversarial probe suite; exit 1 if any probe passes, overruns or errs",
            "reasoning-rl verifiers probe math")
    q.add_argument("name", help="verifier name")
    q.add_argument("--budget", type=pos_float, default=5.0, help="seconds allowed per probe")
    q.set_defaults(func=cmd_probe)
