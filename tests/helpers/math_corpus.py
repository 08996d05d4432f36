"""A generator of realistic model outputs for known gold answers: the corpus of the differential test
against math-verify (tests/test_math_differential.py).

Each item is (template name, output, gold, label): label True when the output's final answer equals
the gold by construction, False when it ends on a different value (some of those restate the gold
mid-solution as a distractor). The formats are those real model outputs take: word-problem prose
with money and calculator annotations (GSM8K style), `####` and `A:` endings, answer phrases with
trailing punctuation, bold markdown, multi-step LaTeX with `\\boxed{}`, fractions and decimals,
units, percentages. Deterministic for a seed; the outputs are written here, none copied from any set.
"""
from __future__ import annotations

import random
from fractions import Fraction

NAMES = ["Janet", "Tom", "Aisha", "Luis", "Mei", "Ravi", "Olga", "Sam"]
ITEMS = [("eggs", "egg"), ("apples", "apple"), ("tickets", "ticket"), ("books", "book"), ("cookies", "cookie")]


def _money_prose(r: random.Random, ans: int) -> str:
    name, (items, item) = r.choice(NAMES), r.choice(ITEMS)
    price = r.randint(2, 9)
    count = max(1, ans // price)
    return (f"{name} has {count + 3} {items} and keeps 3, so {count + 3} - 3 = <<{count + 3}-3={count}>>{count} "
            f"{items} are left.\nShe sells them for ${price} per {item}, so she makes {count} * {price} = "
            f"$<<{count}*{price}={count * price}>>{count * price} every day.\n")


def _steps(r: random.Random) -> str:
    a, b = r.randint(2, 30), r.randint(2, 30)
    return f"First, {a} + {b} = {a + b}. Then we double it: {2 * (a + b)}.\n"


# (name, builder(r, shown_answer, distractor) -> output): `shown` is the final answer as the model writes it
TEMPLATES = {
    "gsm8k ####": lambda r, v, d: _money_prose(r, 12) + d + f"#### {v}",
    "A: line": lambda r, v, d: _money_prose(r, 20) + d + f"A: {v}",
    "A: line with money": lambda r, v, d: _money_prose(r, 30) + d + f"A: ${v}",
    "answer phrase": lambda r, v, d: _steps(r) + d + f"The answer is {v}.",
    "final answer bold": lambda r, v, d: _steps(r) + d + f"**Final answer:** {v}",
    "final answer is latex": lambda r, v, d: _steps(r) + d + f"The final answer is ${v}$. I hope it is correct.",
    "boxed after latex steps": lambda r, v, d: ("We compute \\[ \\frac{6}{3} + 1 = 3 \\] and then \\[ 3 \\cdot 2 = 6. \\]\n"
                                                 + d + f"Therefore the result is $\\boxed{{{v}}}$."),
    "boxed display": lambda r, v, d: _steps(r) + d + f"$$\\boxed{{{v}}}$$",
    "answer colon trailing dot": lambda r, v, d: _steps(r) + d + f"Answer: {v}.",
    "bold number last": lambda r, v, d: _steps(r) + d + f"So in total:\n**{v}**",
    "units": lambda r, v, d: _steps(r) + d + f"The answer is {v} dollars.",
    "restated then final": lambda r, v, d: (f"Let me guess first: maybe {d.strip() or 'something'}. Checking again.\n"
                                            + _steps(r) + f"The answer is {v}."),
}


def _forms(gold) -> list[str]:
    """Ways a model writes a gold value."""
    if isinstance(gold, Fraction):
        out = [f"\\frac{{{gold.numerator}}}{{{gold.denominator}}}", f"{gold.numerator}/{gold.denominator}"]
        if 100 % gold.denominator == 0 or gold.denominator in (2, 4, 5, 8):
            out.append(str(float(gold)))
        return out
    if isinstance(gold, float):
        return [f"{gold}", f"{gold:.2f}" if round(gold, 2) == gold else f"{gold}"]
    out = [str(gold)]
    if abs(gold) >= 1000:
        out.append(f"{gold:,}")
    return out


def _gold_text(gold) -> str:
    if isinstance(gold, Fraction):
        return f"\\frac{{{gold.numerator}}}{{{gold.denominator}}}"
    return str(gold)


def _wrong(r: random.Random, gold):
    if isinstance(gold, Fraction):
        return gold + Fraction(1, gold.denominator)
    if isinstance(gold, float):
        return round(gold + r.choice([0.5, 1.25, -0.75]), 2)
    return gold + r.choice([1, -1, 2, 10, gold or 3])


def corpus(seed: int = 0, per_template: int = 200) -> list[tuple[str, str, str, bool]]:
    r = random.Random(seed)
    golds = [r.randint(0, 99) for _ in range(30)] + [r.randint(100, 5000) for _ in range(12)] \
        + [-r.randint(1, 40) for _ in range(6)] + [round(r.uniform(0.1, 99), 2) for _ in range(8)] \
        + [Fraction(r.randint(1, 11), r.choice([2, 3, 4, 5, 7, 8])) for _ in range(12)]
    golds = [g for g in golds if not (isinstance(g, Fraction) and g.denominator == 1)]
    items = []
    for name, build in TEMPLATES.items():
        for k in range(per_template):
            gold = r.choice(golds)
            if name in ("A: line with money", "units", "gsm8k ####") and not isinstance(gold, int):
                gold = r.randint(1, 300)  # money and GSM8K answers are whole numbers
            right = k % 2 == 0
            value = gold if right else _wrong(r, gold)
            shown = r.choice(_forms(value))
            distractor = "" if right or k % 4 != 1 else f"At first I thought it was {r.choice(_forms(gold))}.\n"
            items.append((name, build(r, shown, distractor), _gold_text(gold), right))
    return items
