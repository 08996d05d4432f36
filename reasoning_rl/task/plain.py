"""Prompts for a model with no chat template (a base model): the plain template, its stop string, the run's note.

    plain_template(configured, checked) -> str        tasks.plain_template, or its default for what the verifier reads
    fill(template, text, where) -> str                 the prompt text in the template
    cue_stop(template) -> tuple[str, ...]              the stop string the template implies ('\\nQuestion:'), or ()
    note(name, template, stop) -> str                  the one line a run or an evaluation starts with

A chat model ends its turn with a token of its own; a base model has no turn to end. Given a question it answers and
then goes on writing: the next question, another answer, until the token limit (Gemma 3 270M base: every completion
of forty cut at 128 tokens). The field's "zero" RL from a base model uses a plain template, a question and a cue for
the answer, and stops a completion where the model starts the next question. The default here is that: 'Question:
{prompt}\\nAnswer:' and the stop string '\\nQuestion:', read off the template's text before {prompt}, so a template
the user writes brings its own stop.

Not here: the chat template (task/task.py renders with it), the decode loop that ends a row at a stop string
(rollout/decode.py).
"""
from __future__ import annotations

from ..errors import UserError

DEFAULT = "Question: {prompt}\nAnswer:"


def plain_template(configured: str, checked: str) -> str:
    """tasks.plain_template, or its default: the question-and-answer template where the verifier reads the completion
    alone, the prompt as it is where the completion continues it (a code body: prompt+completion)."""
    if configured:
        if "{prompt}" not in configured:
            raise UserError(f"tasks.plain_template: value {configured!r} has no {{prompt}} (where the prompt goes)")
        return configured
    return "{prompt}" if checked == "prompt+completion" else DEFAULT


def fill(template: str, text: str, where: str) -> str:
    """`text` put where the template says {prompt} (only there: other braces are the template's own text)."""
    head, sep, tail = template.partition("{prompt}")
    if not sep:
        raise UserError(f"tasks.plain_template: {where}: {template!r} has no {{prompt}}")
    return f"{head}{text}{tail}"


def cue_stop(template: str) -> tuple[str, ...]:
    """The stop string a plain template implies: its text before {prompt} (stripped) on a new line, where a model
    that has answered starts the next question; () when the template starts with {prompt}."""
    cue = template.partition("{prompt}")[0].strip()
    return (f"\n{cue}",) if cue else ()


def note(name: str, template: str, stop: tuple[str, ...]) -> str:
    """One line: the model has no chat template, the template its prompts are in, and where completions stop."""
    line = f"note: {name} has no chat template: prompts in tasks.plain_template {template!r}; "
    if stop:
        return line + f"completions end at EOS, at generation.stop {list(stop)!r} or at generation.max_tokens"
    return line + ("no stop string: a base model's completions may run to generation.max_tokens (set "
                   "generation.stop, or a plain_template with a cue before {prompt})")
