"""A model with no chat template (a base model): prompts in the plain template, completions that end at its stop
string, and the one line a run or an evaluation says about it (task/plain.py, rollout/decode.py)."""
import subprocess

import pytest

from reasoning_rl.config.knobs import from_dict
from reasoning_rl.config.sections import TaskConfig
from reasoning_rl.errors import UserError
from reasoning_rl.task import plain
from reasoning_rl.task.task import Task

from .conftest import PY, run_env
from .helpers.hf_model import build_hf_model, gsm8k_rows, write_jsonl

# (tasks.plain_template, what the verifier reads, the template used, the stop string it implies)
TEMPLATES = [
    ("", "completion", "Question: {prompt}\nAnswer:", ("\nQuestion:",)),  # the default for a checked answer
    ("", "prompt+completion", "{prompt}", ()),  # a code body continues its prompt: nothing around it, no cue
    ("Problem: {prompt}\nSolution:", "completion", "Problem: {prompt}\nSolution:", ("\nProblem:",)),
    ("{prompt}\nA:", "completion", "{prompt}\nA:", ()),  # nothing before {prompt}: no cue to stop at
    ("  Q:  {prompt} A:", "completion", "  Q:  {prompt} A:", ("\nQ:",)),  # the cue stripped, on a new line
]


@pytest.mark.parametrize("configured, checked, used, stop", TEMPLATES)
def test_the_plain_template_and_its_stop(configured, checked, used, stop):
    assert plain.plain_template(configured, checked) == used
    assert plain.cue_stop(used) == stop


def test_a_template_without_its_prompt_is_one_line():
    with pytest.raises(UserError, match=r"tasks.plain_template: value 'Q: \{question\}' has no \{prompt\}"):
        plain.plain_template("Q: {question}", "completion")


def test_fill_puts_the_text_only_where_prompt_is():
    # braces in the text or the template are left alone (str.format would read them as fields)
    assert plain.fill("Q{x}: {prompt}\nA:", "f({a}) = ?", "row 0") == "Q{x}: f({a}) = ?\nA:"


@pytest.fixture(scope="module")
def base_folder(tmp_path_factory):
    rows = gsm8k_rows(40)
    return build_hf_model(tmp_path_factory.mktemp("base"), [r["question"] + r["answer"] for r in rows],
                          vocab_size=300, chat=False)


def test_a_model_without_a_chat_template_gets_the_plain_template_and_its_stop(tmp_path, base_folder):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base_folder)
    assert not tok.chat_template
    path = write_jsonl(tmp_path / "g.jsonl", gsm8k_rows(20))
    task = Task.from_config(from_dict(TaskConfig, {"source": str(path), "preset": "gsm8k",
                                                   "instruction": "End with #### N."}, prefix="tasks"))
    task.render(tok)
    row = task.train[0]
    assert not task.chat and row["prompt"] == f"Question: {row['raw']}\nEnd with #### N.\nAnswer:"
    assert task.stops() == ("\nQuestion:",) and task.stops(["\n\n"]) == ("\n\n",)  # generation.stop wins
    lines = []
    task.note_format("base", (), lines.append)
    assert lines == ["note: base has no chat template: prompts in tasks.plain_template 'Question: {prompt}\\nAnswer:'; "
                     "completions end at EOS, at generation.stop ['\\nQuestion:'] or at generation.max_tokens"]
    # tasks.chat_template=off: the text as it is (a code prompt a base model continues), no stop, no note
    off = Task.from_config(from_dict(TaskConfig, {"source": str(path), "preset": "gsm8k", "chat_template": "off"},
                                     prefix="tasks"))
    off.render(tok)
    assert off.train[0]["prompt"] == off.train[0]["raw"] and off.stops() == () and not off.plain


def test_eval_of_a_base_model_says_its_template_and_that_nothing_ended(tmp_path, base_folder):
    """A real evaluation of a base model (random weights: it never writes the stop string) with a template that
    implies no stop: the start line says so, and the end line says every completion was cut and why."""
    data = write_jsonl(tmp_path / "g.jsonl", gsm8k_rows(30))
    r = subprocess.run([PY, "-m", "reasoning_rl", "eval", "--dataset", str(data), "--preset", "gsm8k",
                        "--set", f"model.name_or_path={base_folder}", "--set", "tasks.plain_template={prompt}\nA:",
                        "--set", "generation.max_tokens=6", "--set", "eval.size=4", "--set",
                        f"output_dir={tmp_path / 'ev'}", "--limit", "4"],
                       capture_output=True, text=True, timeout=300, env=run_env())
    assert r.returncode == 0, r.stderr[-2000:]
    assert "has no chat template: prompts in tasks.plain_template '{prompt}\\nA:'; no stop string" in r.stderr
    assert "note: every completion was cut at generation.max_tokens=6 (none ended)" in r.stderr
    assert "no stop string is set" in r.stderr


def test_a_base_models_plain_template_and_stop_travel_with_its_final_folder(tmp_path):
    """A model trained in a plain template is evaluated in it: final/prompt_format.json carries the template and the
    stop strings, and a command that loads the folder takes them unless it sets its own."""
    from reasoning_rl import config
    from reasoning_rl.config import prompt_format
    from reasoning_rl.config.sections import Config

    trained = config.load(Config, overrides=["tasks.plain_template=Problem: {prompt}\nSolution:",
                                             "generation.stop=[\"\\nProblem:\", \"\\n\\n\"]"])
    prompt_format.write(str(tmp_path), trained)
    later = config.load(Config, overrides=[f"model.name_or_path={tmp_path}"])
    cfg, note = prompt_format.adopt(later, given=set())
    assert cfg.tasks.plain_template == "Problem: {prompt}\nSolution:"
    assert cfg.generation.stop == ("\nProblem:", "\n\n") and "tasks.plain_template=" in note
    own, note = prompt_format.adopt(later, given={"generation.stop"})
    assert own.generation.stop == () and "this command's own generation.stop" in note
