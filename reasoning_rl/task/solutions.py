"""A gold solution's forms: its final answer, the completion that boxes it, and the turns of a calculator episode.

    gsm8k_answer(solution)          the answer after GSM8K's last '####' (thousands separators removed), or None
    last_boxed(solution)            the last \\boxed{...} of a text, or None
    boxed_target(solution)          tasks.target_format=boxed: the lines before '####', annotations removed, then
                                    'The answer is \\boxed{N}.'
    calculator_segments(solution)   tasks.target_format=calculator: [(text up to a call <<expr>>, its value), ...,
                                    (the closing text, "")]

Pure text functions: no rows, no tokenizer. Not here: playing the turns as an episode (data/gold_traces.py), the
task that reads the solutions (task/task.py).
"""
from __future__ import annotations

import re
from typing import Callable

from verifiers.math_extract import boxed_answers


def gsm8k_answer(solution: str) -> str | None:
    """The gold answer after GSM8K's last '####' marker, thousands separators removed."""
    if "####" not in solution:
        return None
    return solution.rsplit("####", 1)[1].strip().replace(",", "") or None


CALCULATOR = re.compile(r"<<[^<>]*>>")


def boxed_target(solution: str) -> str:
    """A GSM8K-style gold solution as a completion that states its answer in a box: the lines before its last '####'
    with the calculator annotations (<<48/2=24>>) removed, then 'The answer is \\boxed{N}.' (tasks.target_format
    boxed). A solution without '####' is returned as it is."""
    answer = gsm8k_answer(solution)
    if answer is None:
        return solution
    body = CALCULATOR.sub("", solution.rsplit("####", 1)[0]).strip()
    return (body + "\n" if body else "") + f"The answer is \\boxed{{{answer}}}."


_ANNOTATED = re.compile(r"<<([^<>=\n]{1,80})=([^<>\n]{1,40})>>")  # GSM8K's <<48/2=24>>
_EQUATION = re.compile(r"^\s*([-+*/().\d\s]*\d[-+*/().\d\s]*?)\s*=\s*(-?[\d,]*\.?\d+)\s*$")  # a line "56 * 9 = 504"
_OPERATOR = re.compile(r"\d\s*[-+*/]\s*[(\d]")


def calculator_segments(solution: str) -> list[tuple[str, str]] | None:
    """A GSM8K-style gold solution as the turns of a calculator episode (tasks.target_format calculator): a list of
    (the model's text up to and including a call `<<expression>>`, the value the solution gives it), the last one
    (the closing text, ""): its final line 'The answer is \\boxed{N}.'. Each of GSM8K's annotations `<<48/2=24>>`
    becomes a call where it stands; a line that is an equation and nothing else (`56 * 9 = 504`) becomes a call of its
    left side. None for a solution without '####' or without a calculation."""
    answer = gsm8k_answer(solution)
    if answer is None:
        return None
    turns: list[tuple[str, str]] = []
    text = ""
    for line in solution.rsplit("####", 1)[0].strip().splitlines():
        eq = _EQUATION.match(line)
        if eq and not _ANNOTATED.search(line) and _OPERATOR.search(eq.group(1)):
            turns.append((text + f"<<{eq.group(1).strip()}>>", eq.group(2).replace(",", "")))
            text = ""
            continue
        start = 0
        for m in _ANNOTATED.finditer(line):  # the text before each annotation and the call close a turn
            turns.append((text + line[start:m.start()] + f"<<{m.group(1).strip()}>>", m.group(2).strip()))
            text, start = "", m.end()
        text += (line[start:].lstrip() if start else line) + "\n"  # after a call: its answer ended with a newline
    if not turns:
        return None
    return turns + [(text + f"The answer is \\boxed{{{answer}}}.", "")]


def last_boxed(solution: str) -> str | None:
    boxes = boxed_answers(solution)
    return boxes[-1].strip() if boxes else None


EXTRACTORS: dict[str, Callable[[str], str | None]] = {"none": lambda s: s, "gsm8k": gsm8k_answer, "boxed": last_boxed}
