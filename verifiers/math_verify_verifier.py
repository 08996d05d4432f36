"""`math_verify`: Hugging Face's math-verify as a registered verifier (a reward term or a second opinion).

    verifiers.verify("math_verify", completion="... so the answer is $\\frac{1}{2}$", reference="0.5")

math-verify extracts the answer from the completion (LaTeX and plain expressions, `\\boxed{}` first)
and compares it with the parsed reference by sympy. Its own timeouts are `signal.alarm`, which fails
off the main thread (a Ray actor, a thread pool) and would race our worker's deadline; here they are
switched off (`parsing_timeout=None`, `timeout_seconds=None`) and the runtime's per-call wall clock,
which kills the worker process, bounds every call instead, from any thread.

Statuses: equal -> CORRECT (1.0); not equal -> INCORRECT (0.0); nothing extracted from the
completion -> UNPARSEABLE (0.0); a reference math-verify cannot parse -> ABSTAIN (masked: the
verifier does not apply). The detail names what each side parsed to.

Two guards before math-verify's comparison, because as a reward it pays a policy for not answering:
  - an empty last `\\boxed{}` is no answer (math-verify reads the expression before it: "42 + 78 = \\boxed{}" is
    judged equal to 120);
  - with the prompt given (the reward passes it), an extracted expression that the prompt already holds
    ("77 + 42" for "What is 77 + 42?", "\\sqrt{704}" for "Simplify $\\sqrt{704}$.", the inequality a question asks
    to solve) restates the question: math-verify evaluates it and would pay the echo;
  - with `truncated=True` (the completion was cut at its token limit), an answer the text does not state in an
    answer form (a box, ####, an answer phrase: `math`'s extraction decides) is no answer: math-verify would read
    the last number of the cut text.
All are UNPARSEABLE, as the `math` verifier scores them. What math-verify still accepts
    that `math` does not is listed in docs/verifiers.md.

Not here: our own extraction rules (that is the `math` verifier); this one is math-verify as it is.
"""
from __future__ import annotations

import logging
from typing import Any

from reasoning_rl.types import Status, Verdict

from .base import Verifier, VerifierSpec
from .math_extract import STATED_PATHS, boxed_answers, extract_answer, restates_expression


def _quiet() -> None:
    # math-verify warns on every call made with its timeouts switched off; ours bound the call instead
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    for name in list(logging.root.manager.loggerDict):
        if name.startswith("math_verify"):
            logging.getLogger(name).setLevel(logging.ERROR)


class MathVerifyVerifier(Verifier):
    name = "math_verify"
    version = "3"  # 3: the reference read as LaTeX first; a restated expression of any kind is no answer; a truncated
    # completion (option `truncated`) with no answer stated is none
    reads_prompt = True
    reads_truncation = True
    spec = VerifierSpec(needs=("reference",), output_range=(0.0, 1.0), deterministic=True, default_timeout=10.0,
                        description="Hugging Face math-verify's extraction and sympy comparison (its signal "
                                    "timeouts off; the runtime's wall clock bounds each call)")

    def verify(self, completion: str, reference: Any = None, **options: Any) -> Verdict:
        prompt = options.pop("prompt", None)
        truncated = options.pop("truncated", False)
        if options:
            raise ValueError(f"math_verify: unknown option {next(iter(options))!r}; valid: ['timeout', 'prompt', "
                             f"'truncated']")
        from math_verify import parse, verify

        _quiet()
        if reference is None or not str(reference).strip():
            return Verdict.masked_as(Status.ABSTAIN, "no reference answer")
        ref = str(reference).strip()
        # a reference is one answer: read as LaTeX math first ("8\\sqrt{11}" read bare is the number 8, and
        # "x^2 + 10x + 9" the number 9), as plain text only when that finds nothing
        gold = parse(f"${ref}$", parsing_timeout=None) or parse(ref, parsing_timeout=None)
        if not gold:
            return Verdict.masked_as(Status.ABSTAIN, f"math-verify cannot parse the reference {ref[:80]!r}")
        boxes = boxed_answers(str(completion))
        if boxes and not boxes[-1].strip():
            return Verdict.unparseable(detail="an empty \\boxed{} (math-verify would read the expression before it)")
        if truncated and extract_answer(str(completion))[1] not in STATED_PATHS:
            return Verdict.unparseable(detail="cut at the token limit with no answer stated (math-verify would read "
                                              "the last number of the cut text)")
        pred = parse(str(completion), parsing_timeout=None)
        if not pred:
            return Verdict.unparseable(detail="math-verify extracted no answer")
        if prompt and restates_expression(str(pred[-1]), str(prompt), ref):
            return Verdict.unparseable(detail=f"{str(pred[-1])[:60]!r} restates the prompt's expression")
        shown = f"{str(pred[-1])[:80]!r} vs {str(gold[-1])[:80]!r}"
        if verify(gold, pred, timeout_seconds=None):
            return Verdict.correct(detail=f"{shown}: equal")
        return Verdict.incorrect(detail=f"{shown}: not equal")
