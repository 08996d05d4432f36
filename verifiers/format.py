"""Format rules: cheap, deterministic shaping rewards. Never an outcome on their own.

  think_answer  exactly one <think>...</think> followed by exactly one <answer>...</answer>, both
                closed, in that order, not nested, nothing after the answer, a non-empty answer.
                Tags are matched on the raw text, so a tag inside the answer ("<answer>x<think>")
                or a second, spoofed pair fails: 1.0 or 0.0.
  boxed         exactly one non-empty \\boxed{...}: 1.0 or 0.0.
  soft_length   DAPO's overlong penalty: 0 up to L_max - L_cache tokens (characters when no
                tokenizer is given), falling linearly to -1 at L_max, -1 beyond. (Yu et al. 2025)
  repetition    -(share of repeated n-grams), in [-1, 0]: 0 for no repeated n-gram.

Options (keyword arguments): soft_length takes `max_length` and `cache_length`; repetition
takes `n`. Standard library only.
"""
from __future__ import annotations

import re
from typing import Any

from reasoning_rl.types import Verdict

from .base import Verifier, VerifierSpec
from .math_extract import boxed_answers

_TAG = re.compile(r"</?\s*(think|answer)\s*>", re.I)


class ThinkAnswer(Verifier):
    name = "think_answer"
    version = "1"
    spec = VerifierSpec(needs=(), output_range=(0.0, 1.0), default_timeout=1.0,
                        description="one <think>..</think> then one <answer>..</answer>, closed, in order, non-empty")

    def verify(self, completion: str, reference: Any = None, **options: Any) -> Verdict:
        text = str(completion or "")
        tags = [(m.group(0).replace(" ", "").lower(), m.start(), m.end()) for m in _TAG.finditer(text)]
        expected = ["<think>", "</think>", "<answer>", "</answer>"]
        got = [t for t, _, _ in tags]
        if got != expected:
            return Verdict.incorrect(detail=f"tags {got[:8]} != {expected}")
        if text[:tags[0][1]].strip():
            return Verdict.incorrect(detail="text before <think>")
        if text[tags[1][2]:tags[2][1]].strip():
            return Verdict.incorrect(detail="text between </think> and <answer>")
        if text[tags[3][2]:].strip():
            return Verdict.incorrect(detail="text after </answer>")
        if not text[tags[2][2]:tags[3][1]].strip():
            return Verdict.incorrect(detail="empty answer")
        return Verdict.correct(detail="well-formed")


class Boxed(Verifier):
    name = "boxed"
    version = "1"
    spec = VerifierSpec(needs=(), output_range=(0.0, 1.0), default_timeout=1.0,
                        description="exactly one non-empty \\boxed{...}")

    def verify(self, completion: str, reference: Any = None, **options: Any) -> Verdict:
        boxes = boxed_answers(str(completion or "")[-20000:])
        if len(boxes) == 1 and boxes[0].strip():
            return Verdict.correct(detail="one boxed answer")
        return Verdict.incorrect(detail=f"{len(boxes)} boxed answers" if len(boxes) != 1 else "empty box")


class SoftLength(Verifier):
    name = "soft_length"
    version = "1"
    spec = VerifierSpec(needs=(), output_range=(-1.0, 0.0), default_timeout=1.0,
                        description="DAPO soft overlong penalty (max_length, cache_length)")

    def verify(self, completion: str, reference: Any = None, *, max_length: int = 1024, cache_length: int = 256,
               length: int | None = None, **options: Any) -> Verdict:
        if not 0 <= cache_length < max_length:
            raise ValueError(f"soft_length: need 0 <= cache_length < max_length, got {cache_length}, {max_length}")
        n = len(str(completion or "")) if length is None else int(length)
        start = max_length - cache_length
        if n <= start:
            return Verdict.correct(0.0, detail=f"length {n} <= {start}")
        if n >= max_length:
            return Verdict.incorrect(-1.0, detail=f"length {n} >= {max_length}")
        return Verdict.incorrect(-(n - start) / cache_length, detail=f"length {n} in the soft zone")


class Repetition(Verifier):
    name = "repetition"
    version = "1"
    spec = VerifierSpec(needs=(), output_range=(-1.0, 0.0), default_timeout=1.0,
                        description="-(share of repeated word n-grams), n=3 by default")

    def verify(self, completion: str, reference: Any = None, *, n: int = 3, **options: Any) -> Verdict:
        words = str(completion or "").split()
        grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
        if not grams:
            return Verdict.correct(0.0, detail="too short to repeat")
        repeated = len(grams) - len(set(grams))
        share = repeated / len(grams)
        return (Verdict.correct(0.0, detail="no repeated n-gram") if repeated == 0
                else Verdict.incorrect(-share, detail=f"{repeated}/{len(grams)} repeated {n}-grams"))
