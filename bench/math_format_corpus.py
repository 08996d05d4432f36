"""A second differential corpus from the real model: MATH- and GSM8K-format problems at temperature 1.

    .venv/bin/python bench/math_format_corpus.py problems DIR            # DIR/math.jsonl, DIR/gsm8k.jsonl
    .venv/bin/reasoning-rl eval --dataset DIR/math.jsonl --preset math --split all -n 2 --no-greedy \\
        --set model.name_or_path=smollm2-135m-instruct --set generation.max_tokens=256 \\
        --set "tasks.instruction='Put the final answer in \\boxed{}.'" --set output_dir=DIR/run-math
    (the same with DIR/gsm8k.jsonl --preset gsm8k and output_dir=DIR/run-gsm8k)
    .venv/bin/python bench/math_format_corpus.py corpus DIR/run-math DIR/run-gsm8k [--write FIXTURE]

`problems` writes problems generated here, with a seed: MATH's layout (`problem`, `answer` in LaTeX: common
fractions, simplest radical form, answers in terms of pi, interval notation, ordered pairs, polynomials,
logarithms, percentages) and GSM8K's (`question`, `answer` ending in `#### N`: multi-step word problems with
money, rates and remainders). Nothing is taken from MATH or GSM8K themselves: only their formats.

`corpus` reads the eval runs' archives (every completion the model sampled), judges each completion with the
`math` and the `math_verify` verifiers (the prompt passed as context, as a run passes it), prints how often they
agree on pass or fail and every completion where they do not, and with `--write` keeps the rows (the problem
text, gold, completion, finish reason, both statuses, a label: the common verdict where they agree, null where a
hand label is due) for tests/test_math_real_model.py, whose triage table says who is right on each disagreement.

Not here: which verifier is right on a disagreement (the test's triage table says, one by one), timings
(bench/verifiers.py).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.path.insert(0, os.path.dirname(HERE))


def frac(q: Fraction) -> str:
    """A rational in MATH's answer form: an integer, or \\frac{a}{b} with the sign in front."""
    if q.denominator == 1:
        return str(q.numerator)
    sign = "-" if q < 0 else ""
    return f"{sign}\\frac{{{abs(q.numerator)}}}{{{q.denominator}}}"


def radical(n: int) -> tuple[int, int]:
    """sqrt(n) = a sqrt(b) with b square-free."""
    a, b = 1, n
    for k in range(int(math.isqrt(n)), 1, -1):
        if n % (k * k) == 0:
            return k, n // (k * k)
    return a, b


def m_fraction_sum(r: random.Random) -> tuple[str, str]:
    a, b, c, d = r.randint(1, 9), r.randint(2, 12), r.randint(1, 9), r.randint(2, 12)
    op = r.choice("+-")
    q = Fraction(a, b) + Fraction(c, d) if op == "+" else Fraction(a, b) - Fraction(c, d)
    return (f"Compute $\\frac{{{a}}}{{{b}}} {op} \\frac{{{c}}}{{{d}}}$. Express your answer as a common fraction.",
            frac(q))


def m_radical(r: random.Random) -> tuple[str, str]:
    k, s = r.randint(2, 9), r.choice([2, 3, 5, 6, 7, 10, 11])
    return f"Simplify $\\sqrt{{{k * k * s}}}$.", f"{k}\\sqrt{{{s}}}"


def m_linear(r: random.Random) -> tuple[str, str]:
    a, b, c = r.choice([2, 3, 4, 5, 6, 7]), r.randint(-9, 9), r.randint(-20, 20)
    return f"Solve for $x$: ${a}x {'+' if b >= 0 else '-'} {abs(b)} = {c}$.", frac(Fraction(c - b, a))


def m_roots(r: random.Random) -> tuple[str, str]:
    p, q = r.randint(-9, 9), r.randint(-9, 9)
    what = r.choice(["sum", "product"])
    s, t = -(p + q), p * q  # x^2 + s x + t = (x - p)(x - q)
    poly = "x^2" + ("" if s == 0 else f" {'+' if s > 0 else '-'} {'' if abs(s) == 1 else abs(s)}x") + \
        ("" if t == 0 else f" {'+' if t > 0 else '-'} {abs(t)}")
    return f"What is the {what} of the roots of ${poly} = 0$?", str(p + q if what == "sum" else p * q)


def m_circle(r: random.Random) -> tuple[str, str]:
    rad = r.randint(2, 12)
    if r.random() < 0.5:
        return (f"A circle has a radius of {rad} units. What is its area, in square units? Express your answer in "
                f"terms of $\\pi$.", f"{rad * rad}\\pi")
    return (f"A circle has a diameter of {2 * rad} cm. What is its circumference, in cm? Express your answer in "
            f"terms of $\\pi$.", f"{2 * rad}\\pi")


def m_interval(r: random.Random) -> tuple[str, str]:
    a, b, c = r.randint(2, 6), r.randint(-9, 9), r.randint(-20, 20)
    bound = frac(Fraction(c - b, a))
    if r.random() < 0.5:
        return (f"Solve ${a}x {'+' if b >= 0 else '-'} {abs(b)} > {c}$. Express your answer in interval notation.",
                f"({bound}, \\infty)")
    return (f"Solve ${a}x {'+' if b >= 0 else '-'} {abs(b)} \\le {c}$. Express your answer in interval notation.",
            f"(-\\infty, {bound}]")


def m_power(r: random.Random) -> tuple[str, str]:
    a, m, b, n = r.randint(2, 5), r.randint(2, 5), r.randint(2, 9), 2
    return f"Evaluate ${a}^{{{m}}} - {b}^{{{n}}}$.", str(a**m - b**n)


def m_gcd(r: random.Random) -> tuple[str, str]:
    g = r.randint(2, 15)
    x, y = g * r.randint(2, 12), g * r.randint(2, 12)
    if r.random() < 0.5:
        return f"What is the greatest common divisor of ${x}$ and ${y}$?", str(math.gcd(x, y))
    return f"What is the least common multiple of ${x}$ and ${y}$?", str(x * y // math.gcd(x, y))


def m_expand(r: random.Random) -> tuple[str, str]:
    p, q = r.randint(1, 9), r.randint(-9, 9)
    s, t = p + q, p * q

    def term(c: int, x: str) -> str:
        return "" if c == 0 else f" {'+' if c > 0 else '-'} {'' if abs(c) == 1 and x else abs(c)}{x}"
    return (f"Expand $(x + {p})(x {'+' if q >= 0 else '-'} {abs(q)})$.", f"x^2{term(s, 'x')}{term(t, '')}")


def m_function(r: random.Random) -> tuple[str, str]:
    a, b, x = r.randint(2, 5), r.randint(-9, 9), r.randint(-4, 4)
    return (f"If $f(x) = {a}x^2 {'+' if b >= 0 else '-'} {abs(b)}$, what is $f({x})$?", str(a * x * x + b))


def m_midpoint(r: random.Random) -> tuple[str, str]:
    a, b, c, d = (r.randint(-10, 10) for _ in range(4))
    return (f"What is the midpoint of the segment with endpoints $({a}, {b})$ and $({c}, {d})$? Express your answer "
            f"as an ordered pair.", f"({frac(Fraction(a + c, 2))}, {frac(Fraction(b + d, 2))})")


def m_probability(r: random.Random) -> tuple[str, str]:
    red, blue = r.randint(1, 9), r.randint(1, 9)
    return (f"A bag has {red} red marbles and {blue} blue marbles. One marble is drawn at random. What is the "
            f"probability that it is red? Express your answer as a common fraction.", frac(Fraction(red, red + blue)))


def m_log(r: random.Random) -> tuple[str, str]:
    base = r.choice([2, 3, 5])
    k = r.randint(2, 6 if base == 2 else 4)
    return f"Evaluate $\\log_{{{base}}} {base ** k}$.", str(k)


def m_percent(r: random.Random) -> tuple[str, str]:
    p, n = r.choice([5, 12, 15, 20, 25, 35, 40, 75]), r.randint(2, 40) * 10
    v = Fraction(p * n, 100)
    return f"What is ${p}\\%$ of ${n}$?", str(v.numerator) if v.denominator == 1 else f"{float(v):g}"


MATH_FAMILIES = [m_fraction_sum, m_radical, m_linear, m_roots, m_circle, m_interval, m_power, m_gcd, m_expand,
                 m_function, m_midpoint, m_probability, m_log, m_percent]


def g_shopping(r: random.Random) -> tuple[str, int]:
    n, price = r.randint(2, 6), r.randint(2, 9)
    paid = (n * price // 10 + 1 + r.randint(0, 2)) * 10
    return (f"Lena buys {n} notebooks that cost ${price} each. She pays with ${paid}. How much change does she get, "
            f"in dollars?", paid - n * price)


def g_rate(r: random.Random) -> tuple[str, int]:
    speed, hours, extra = r.randint(30, 70), r.randint(2, 5), r.randint(10, 60)
    return (f"A train travels at {speed} miles per hour for {hours} hours, then another {extra} miles. How many miles "
            f"does it travel in all?", speed * hours + extra)


def g_remainder(r: random.Random) -> tuple[str, int]:
    per, boxes, left = r.randint(4, 12), r.randint(3, 9), r.randint(1, 3)
    total = per * boxes + left
    return (f"A baker has {total} muffins. She packs them in boxes of {per} and eats whatever is left over. How many "
            f"full boxes does she pack?", boxes)


def g_weekly(r: random.Random) -> tuple[str, int]:
    daily, days, spent = r.randint(3, 15), r.choice([5, 6, 7]), r.randint(5, 20)
    return (f"Tom earns ${daily} a day and works {days} days a week. He spends ${spent} of it on lunch. How much money "
            f"does he keep each week?", daily * days - spent)


def g_fraction_of(r: random.Random) -> tuple[str, int]:
    den = r.choice([2, 3, 4, 5])
    total = den * r.randint(3, 12)
    gave = total // den
    return (f"Priya had {total} stickers. She gave 1/{den} of them to her brother and then bought 7 more. How many "
            f"stickers does she have now?", total - gave + 7)


def g_ages(r: random.Random) -> tuple[str, int]:
    a, diff, years = r.randint(5, 15), r.randint(2, 9), r.randint(2, 10)
    return (f"Omar is {a} years old. His sister is {diff} years older than him. How old will his sister be in "
            f"{years} years?", a + diff + years)


GSM8K_FAMILIES = [g_shopping, g_rate, g_remainder, g_weekly, g_fraction_of, g_ages]


def problems(out_dir: str, n_math: int, n_gsm8k: int, seed: int) -> None:
    r = random.Random(seed)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "math.jsonl"), "w", encoding="utf-8") as f:
        for i in range(n_math):
            fam = MATH_FAMILIES[i % len(MATH_FAMILIES)]
            p, a = fam(r)
            f.write(json.dumps({"problem": p, "answer": a, "type": fam.__name__[2:]}) + "\n")
    with open(os.path.join(out_dir, "gsm8k.jsonl"), "w", encoding="utf-8") as f:
        for i in range(n_gsm8k):
            fam = GSM8K_FAMILIES[i % len(GSM8K_FAMILIES)]
            q, a = fam(r)
            f.write(json.dumps({"question": q, "answer": f"#### {a}", "type": fam.__name__[2:]}) + "\n")
    print(f"{n_math} MATH-format and {n_gsm8k} GSM8K-format problems in {out_dir}")


def archived(run_dir: str, fmt: str) -> list[dict]:
    """The completions of one eval run: id, format, prompt (the problem text), gold, completion, finish reason."""
    rows = []
    with open(os.path.join(run_dir, "archive.jsonl"), encoding="utf-8") as f:
        for line in f:
            if line.strip():
                a = json.loads(line)
                rows.append({"id": f"{fmt}/{a['prompt_id']}/{a['index']}", "format": fmt,
                             "prompt": a["task"]["raw"], "gold": a["task"]["reference"], "prediction": a["text"],
                             "finish_reason": a["finish_reason"]})
    return rows


def corpus(run_dirs: list[str], write: str, workers: int) -> None:
    import verifiers

    rows = []
    for d in run_dirs:
        rows += archived(d, "gsm8k" if "gsm8k" in os.path.basename(os.path.normpath(d)) else "math")
    with verifiers.VerifierPool(num_workers=workers, cache_size=0) as pool:
        for name in ("math", "math_verify"):
            got = pool.run([verifiers.Call(name, r["prediction"], r["gold"], {"prompt": r["prompt"]}) for r in rows])
            for r, v in zip(rows, got):
                r[name] = v.status.value
    def passes(r, name):
        return r[name] == "correct"
    agree = sum(passes(r, "math") == passes(r, "math_verify") for r in rows)
    print(f"{len(rows)} completions ({sum(r['finish_reason'] == 'length' for r in rows)} cut at max tokens); "
          f"math and math_verify agree on pass or fail for {agree} ({agree / max(len(rows), 1):.1%})")
    for fmt in sorted({r["format"] for r in rows}):
        part = [r for r in rows if r["format"] == fmt]
        print(f"  {fmt}: {len(part)} completions, math passes {sum(r['math'] == 'correct' for r in part)}, "
              f"math_verify {sum(r['math_verify'] == 'correct' for r in part)}")
    for r in rows:
        if passes(r, "math") != passes(r, "math_verify"):
            print(f"\n--- {r['id']} gold {r['gold']!r} math={r['math']} math_verify={r['math_verify']} "
                  f"({r['finish_reason']})\n{r['prompt']}\n>>> {r['prediction'][-400:]}")
    if write:  # agreed rows take the common verdict as their label; a disagreement waits for a hand label (null)
        with open(write, "w", encoding="utf-8") as f:
            for r in rows:
                same = passes(r, "math") == passes(r, "math_verify")
                label = {"equivalent": passes(r, "math") if same else None,
                         "labelled_by": "both verifiers" if same else "hand"}
                f.write(json.dumps({**r, **label}) + "\n")
        print(f"\nwrote {write}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("problems", help="write DIR/math.jsonl and DIR/gsm8k.jsonl")
    p.add_argument("out_dir")
    p.add_argument("--math", type=int, default=224)
    p.add_argument("--gsm8k", type=int, default=96)
    p.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("corpus", help="judge the eval runs' completions with both verifiers")
    c.add_argument("run_dirs", nargs="+", help="eval output directories (a name containing 'gsm8k' is GSM8K-format)")
    c.add_argument("--write", default="")
    c.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    if a.cmd == "problems":
        problems(a.out_dir, a.math, a.gsm8k, a.seed)
    else:
        corpus(a.run_dirs, a.write, a.workers)


if __name__ == "__main__":
    main()
