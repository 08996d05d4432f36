"""Arithmetic word problems of one or two steps, made from templates: the real-model demo's data.

Families (each a pure function of a `random.Random` and `max_digits`, like task/embedded/arithmetic.py's):
  word_add   "Maya has 23 shells. She finds 15 more. How many shells does she have now?"    a + b
  word_sub   "... has 41 stickers and gives 17 of them to a friend. How many are left?"      a - b (>= 0)
  word_mul   "... buys 6 boxes of 12 pencils. How many pencils does she buy?"               a * b (a <= 9)
  word_two   two steps: a + b - c, a * b + c, or (a - b) * c                                  an integer >= 0

Small instruct models solve some of these and miss others (SmolLM2-135M-Instruct passes about 1 in 6,
greedy), so a group of samples is often mixed and RL has something to learn. The answer is an integer; the
prompt never contains it. Problems are told about made-up people and ordinary things; none is taken from a
data set.

Not here: the split (task/embedded/split.py), prompts' rendering with a chat template (task/task.py), or anything GSM8K
asks that needs more than two operations.
"""
from __future__ import annotations

import random

_NAMES = ("Maya", "Tom", "Aiko", "Ben", "Lena", "Omar", "Priya", "Sam", "Nora", "Diego", "Ivy", "Kofi")
_THINGS = ("apples", "shells", "stickers", "pencils", "marbles", "cards", "books", "coins", "cookies", "stamps")
_PRONOUN = {"Maya": "She", "Aiko": "She", "Lena": "She", "Priya": "She", "Nora": "She", "Ivy": "She"}


def _who(rng: random.Random) -> tuple[str, str, str]:
    name = rng.choice(_NAMES)
    return name, _PRONOUN.get(name, "He"), rng.choice(_THINGS)


def _n(rng: random.Random, max_digits: int, low: int = 2) -> int:
    return rng.randint(low, max(low + 1, 10 ** max_digits - 1))


def word_add(rng: random.Random, max_digits: int) -> tuple[str, int]:
    name, he, x = _who(rng)
    a, b = _n(rng, max_digits), _n(rng, max_digits)
    return rng.choice((f"{name} has {a} {x}. {he} gets {b} more {x}. How many {x} does {name} have now?",
                       f"There are {a} {x} in a box and {b} {x} on the table. How many {x} are there in all?")), a + b


def word_sub(rng: random.Random, max_digits: int) -> tuple[str, int]:
    name, he, x = _who(rng)
    a, b = sorted((_n(rng, max_digits), _n(rng, max_digits)), reverse=True)
    return rng.choice((f"{name} has {a} {x} and gives {b} of them to a friend. How many {x} are left?",
                       f"A shop had {a} {x}. It sold {b} of them. How many {x} does the shop have now?")), a - b


def word_mul(rng: random.Random, max_digits: int) -> tuple[str, int]:
    name, he, x = _who(rng)
    a, b = rng.randint(2, 9), _n(rng, max_digits)
    return rng.choice((f"{name} buys {a} bags with {b} {x} in each bag. How many {x} does {name} buy?",
                       f"There are {a} shelves with {b} {x} on each shelf. How many {x} are there?")), a * b


def word_two(rng: random.Random, max_digits: int) -> tuple[str, int]:
    name, he, x = _who(rng)
    a, b, c = _n(rng, max_digits), _n(rng, max_digits), rng.randint(2, 9)
    kind = rng.randrange(3)
    if kind == 0:
        c = rng.randint(1, a + b)
        return (f"{name} has {a} {x}. {he} gets {b} more and then gives away {c}. How many {x} does {name} have "
                "now?"), a + b - c
    if kind == 1:
        return (f"{name} buys {c} packs of {a} {x} and finds {b} more. How many {x} does {name} have?"), c * a + b
    a, b = max(a, b), min(a, b)
    return (f"{name} had {a} {x} and lost {b} of them. Each of the {x} that are left is worth {c} points. How many "
            "points are they worth in all?"), (a - b) * c


FAMILIES = {"word_add": word_add, "word_sub": word_sub, "word_mul": word_mul, "word_two": word_two}
