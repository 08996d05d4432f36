"""`math`: is the final answer in a model output equivalent to the reference answer?

    extract (math_extract) -> parse both (math_parse) -> compare (math_equiv)

Verdicts:
  CORRECT / INCORRECT   the answer was found and compared (score 1.0 / 0.0)
  UNPARSEABLE           no trustworthy answer in the output (empty, several different boxed
                        answers, nothing parseable): the model's failure, score 0.0
  INCORRECT             a hedge ("A or B or C"), or an answer found only inside an echo of the prompt
  UNPARSEABLE, too      with the prompt given: a fallback answer (the closing statement's last number) that only
                        restates a number of the question, a closing statement that shares no word with the
                        question (it talks about something else), or an expression copied from the question
                        ("77 + 42" for "What is 77 + 42?", "\\sqrt{704}" for "Simplify $\\sqrt{704}$.")
  UNPARSEABLE, too      with option truncated=True (the completion was cut at its token limit; the reward says so):
                        any answer a fallback would read (the last number, the last math span, the whole output),
                        since a cut text states nothing; a box, a marker or an answer phrase still counts

Several boxed answers that are all equal in value (`\\boxed{5/2}` ... Final Answer: `\\boxed{\\frac{5}{2}}`, a mixed
number and its improper fraction) are one answer (path "equal boxes"); several that differ stay a hedge.
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
from .math_extract import (STATED_PATHS, _NUMBER, MAX_ANSWER_CHARS, TAIL_CHARS, closing_statement, distinct_boxes,
                           extract_answer, extract_choice, is_hedge, looks_like_prose, restates_expression,
                           unbox_restated)
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


_CONTENT = re.compile(r"[A-Za-z]{4,}")
_STOP = frozenset("""that this with from have there their they then than what which when will would each much many
some into were been being does after before also only more most other about your them these those such just very
here where while because answer final total""".split())


def _topics(text: str) -> set[str]:
    """Content words of a text, cut to their first four letters ("received" and "receive" meet)."""
    return {w.lower()[:4] for w in _CONTENT.findall(text) if w.lower() not in _STOP}


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER.findall(text.replace("$", " "))}


def _echoable(prompt) -> bool:
    """Whether an occurrence of `prompt` in the output is an echo to take out before reading the answer: not for a
    prompt of under four characters or a bare number ("7": every 7 the model writes would go with it)."""
    p = str(prompt or "").strip()
    return len(p) >= 4 and not re.fullmatch(r"[-+]?[\d.,\s]+", p)


def _fallback_refused(output: str, answer: str, how: str, prompt: str) -> str | None:
    """Why an answer read into the closing statement is not one, given the question; None when it stands. A last
    number that the question already holds, in a prose sentence that does not compute it (no "="), is a restatement
    (an operand, a quantity of the problem); a closing sentence with no word of the question's is about something
    else."""
    if how not in ("last number", "closing statement", "currency"):
        return None  # a box, a marker, an answer phrase: stated, not read into the text
    sentence, asked = closing_statement(output), _topics(prompt)
    if how == "last number" and answer.replace(",", "") in _numbers(prompt) and "=" not in sentence \
            and looks_like_prose(sentence):  # "3 + 5 - 5 = 3" derives it, a last line "35" states it: not refused
        return f"last number {answer!r} only restates the question"
    if len(asked) >= 3 and looks_like_prose(sentence) and "=" not in sentence \
            and not _topics(sentence) & asked:  # "add them: 7 + 7 = 14." computes it
        return f"closing statement {sentence[-60:]!r} shares no word with the question"
    return None


def _equal_boxes(output: str) -> str | None:
    """The last of several boxed answers when all are equal in value (a/b and \\frac{a}{b}); None otherwise."""
    boxes = distinct_boxes(output)
    try:
        parsed = [parse_answer(b) for b in boxes]
    except ParseFailure:
        return None
    return boxes[-1] if all(equivalent(parsed[0], p) for p in parsed[1:]) else None


def _squash(s: str) -> str:
    return re.sub(r"\s+|^\$|\$$", "", s)


class MathVerifier(Verifier):
    name = "math"
    version = "4"  # 3: a prompt under four characters or a bare number is no longer taken out as an echo; any
    # expression the prompt holds is a restatement; a truncated completion (option `truncated`) has no fallback.
    # 4: placeholder and restated boxes are no answers; a closing statement's predicate; currency is not a span
    # delimiter; repeating decimals; a final answer form beats an earlier unreadable span
    reads_prompt = True
    reads_truncation = True
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
        if _echoable(prompt) and str(prompt).strip() in output:
            output = output.replace(str(prompt).strip(), " ")  # an echo of the prompt is not an answer
        if prompt:
            output = unbox_restated(output, str(prompt))  # a box the question holds, copied, is not an answer
        if gold.kind == "choice":
            letter, how = extract_choice(output)
            if letter is None:
                return Verdict.unparseable(detail=how)
            if letter == gold.value:
                return Verdict.correct(detail=f"choice {letter} ({how})")
            return Verdict.incorrect(detail=f"choice {letter} ({how}) != {gold.value}")
        answer, how = extract_answer(output)
        if answer is None and "different boxed" in how:
            same = _equal_boxes(output)
            if same is not None:
                answer, how = same, "equal boxes"
        if answer is None and (gold.kind == "set" or gold.kind == "seq" and not gold.bracket) \
                and "different boxed" in how:
            boxes = distinct_boxes(output[-TAIL_CHARS:])
            if len(boxes) == len(gold.value):  # one box per element of a list answer is not a hedge
                answer, how = ", ".join(boxes), "boxed list"
        if answer is None:
            return Verdict.unparseable(detail=how)
        if options.get("truncated") and how not in STATED_PATHS:
            return Verdict.unparseable(detail=f"cut at the token limit, and the {how} of a cut text states nothing")
        if prompt and str(prompt).strip():
            refused = _fallback_refused(output, answer, how, str(prompt))
            if refused:
                return Verdict.unparseable(detail=refused)
            if restates_expression(answer, str(prompt), gold_text):
                return Verdict.unparseable(detail=f"{answer[:60]!r} ({how}) restates the question's expression")
        if len(answer) > MAX_ANSWER_CHARS:
            return Verdict.unparseable(detail=f"answer longer than {MAX_ANSWER_CHARS} characters")
        if is_hedge(answer) and not is_hedge(gold_text):
            return Verdict.incorrect(detail=f"hedged answer {answer[:60]!r} ({how})")
        try:
            pred = parse_answer(answer)
        except ParseFailure as e:
            # a phrase that computes ("(B+B-2)/(B!)") holds no single number that answers
            prose = how in ("whole output", "answer phrase") and not re.search(r"[=+*/^(){}]", answer)
            nums = _NUMBER.findall(answer) if prose else []
            if len(nums) != 1:  # "it is 13 apples", "The final answer is Tom buys 10 apples": one number in the
                # phrase is the answer; two are not
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
