"""`math`: is the final answer in a model output equivalent to the reference answer?

    extract (math_extract) -> parse both (math_parse) -> compare (math_equiv)

Verdicts:
  CORRECT / INCORRECT   the answer was found and compared (score 1.0 / 0.0)
  UNPARSEABLE           no trustworthy answer in the output (empty, several different boxed
                        answers, nothing parseable): the model's failure, score 0.0
  INCORRECT             a hedge ("A or B or C"), or an answer found only inside an echo of the prompt
  ABSTAIN               the *reference* cannot be parsed: not the model's fault, masked

No timeouts here: the runtime runs every call in a worker process with a wall-clock kill,
so this module never uses signals and works in any thread. Never imports torch.
"""
from __future__ import annotations

import re
from typing import Any

from reasoning_rl.types import Status, Verdict

from .base import Verifier, VerifierSpec
from .math_equiv import equivalent
from .math_extract import (STATED_PATHS, _NUMBER, MAX_ANSWER_CHARS, TAIL_CHARS, distinct_boxes, extract_answer, extract_choice,
                           is_hedge)
from .math_parse import ParseFailure, parse_answer

_GOLD_NEEDS_EXTRACTION = re.compile(r"\\boxed|\\fbox|answer\s*(?:is|:)|<answer>", re.I)


def gold_answer(reference: str) -> str | None:
    ref = str(reference).strip()
    boxes = distinct_boxes(ref)
    if len(boxes) > 1:  # a reference may list its answers in several boxes
        return ", ".join(boxes)
    if _GOLD_NEEDS_EXTRACTION.search(ref) or "\n" in ref:
        return extract_answer(ref)[0]
    return ref or None


def _squash(s: str) -> str:
    return re.sub(r"\s+|^\$|\$$", "", s)


class MathVerifier(Verifier):
    name = "math"
    version = "1"
    spec = VerifierSpec(needs=("reference",), output_range=(0.0, 1.0), deterministic=True, default_timeout=5.0,
                        description="final answer equivalent to the reference (numbers, expressions, equations, "
                                    "sets, intervals, matrices, choices)")

    def answer_key(self, completion: str) -> str | None:
        """The final answer maj@k votes on (None when there is none)."""
        return extract_answer(completion)[0]

    def states_answer(self, completion: str) -> bool:
        """Does the output state its final answer in an answer form (a box, answer tags, ####, an answer phrase, a
        bold answer), rather than leave the verifier to read one into it (the whole output, the last number)?"""
        answer, path = extract_answer(completion)
        return answer is not None and path in STATED_PATHS

    def verify(self, completion: str, reference: Any = None, **options: Any) -> Verdict:
        if reference is None:
            return Verdict.masked_as(Status.ABSTAIN, "no reference answer")
        gold_text = gold_answer(str(reference))
        if not gold_text:
            return Verdict.masked_as(Status.ABSTAIN, "reference has no answer")
        output = "" if completion is None else str(completion)
        try:
            gold = parse_answer(gold_text)
        except ParseFailure as e:
            # an unparseable reference can still be matched verbatim ("f'"); anything else is not ours to score
            answer, _ = extract_answer(output)
            if answer is not None and _squash(answer) == _squash(gold_text):
                return Verdict.correct(detail="verbatim match of an unparseable reference")
            return Verdict.masked_as(Status.ABSTAIN, f"reference not parseable: {e}")
        prompt = options.get("prompt")
        if prompt and str(prompt).strip() and str(prompt).strip() in output:
            output = output.replace(str(prompt).strip(), " ")  # an echo of the prompt is not an answer
        if gold.kind == "choice":
            letter, how = extract_choice(output)
            if letter is None:
                return Verdict.unparseable(detail=how)
            if letter == gold.value:
                return Verdict.correct(detail=f"choice {letter} ({how})")
            return Verdict.incorrect(detail=f"choice {letter} ({how}) != {gold.value}")
        answer, how = extract_answer(output)
        if answer is None and (gold.kind == "set" or gold.kind == "seq" and not gold.bracket) \
                and "different boxed" in how:
            boxes = distinct_boxes(output[-TAIL_CHARS:])
            if len(boxes) == len(gold.value):  # one box per element of a list answer is not a hedge
                answer, how = ", ".join(boxes), "boxed list"
        if answer is None:
            return Verdict.unparseable(detail=how)
        if len(answer) > MAX_ANSWER_CHARS:
            return Verdict.unparseable(detail=f"answer longer than {MAX_ANSWER_CHARS} characters")
        if is_hedge(answer) and not is_hedge(gold_text):
            return Verdict.incorrect(detail=f"hedged answer {answer[:60]!r} ({how})")
        try:
            pred = parse_answer(answer)
        except ParseFailure as e:
            nums = _NUMBER.findall(answer) if how == "whole output" else []
            if len(nums) != 1:  # "it is 13 apples": one number in a short phrase is the answer; two are not
                return Verdict.unparseable(detail=f"answer {answer[:60]!r} not parseable: {e}")
            answer, how = nums[0], "single number in a phrase"
            pred = parse_answer(answer)
        if equivalent(gold, pred):
            return Verdict.correct(detail=f"{answer[:60]!r} ({how}) == {gold_text[:60]!r}")
        return Verdict.incorrect(detail=f"{answer[:60]!r} ({how}) != {gold_text[:60]!r}")


_DEFAULT = MathVerifier()


def is_equivalent(gold: str, output: str) -> bool:
    """`verify(gold, output) -> bool`, the shape answer-checking scorers call (in-process, no timeouts)."""
    return _DEFAULT.verify(output, gold).status is Status.CORRECT
