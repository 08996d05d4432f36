"""A trained model's folder carries the prompt format it was trained with (final/prompt_format.json), and commands that
load it prompt it the same way unless they set the format themselves, saying which they used."""
from __future__ import annotations

import json

import pytest

from reasoning_rl.cli import main
from reasoning_rl.config import ConfigError, prompt_format
from reasoning_rl.config.knobs import given_keys

TINY = ["--set", "model.sft_warm_start=false", "--set", "model.tiny.num_layers=1"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny model fine-tuned (2 steps) on a file of verified samples with an instruction and a completion length,
    and a GSM8K-format data file to evaluate it on."""
    d = tmp_path_factory.mktemp("fmt")
    samples = d / "samples.jsonl"
    samples.write_text("".join(json.dumps({"prompt": f"{a} + 1 = ?", "completion": str(a + 1), "passed": True}) + "\n"
                               for a in range(8)))
    data = d / "data.jsonl"
    data.write_text("".join(json.dumps({"question": f"{a} + 2 = ?", "answer": f"{a} + 2 = {a + 2}\n#### {a + 2}"})
                            + "\n" for a in range(40)))
    out = d / "model"
    assert main(["sft", "--samples", str(samples), *TINY, "--set", "sft.steps=2", "--set", "sft.batch_size=4",
                 "--set", "tasks.instruction=Answer with a number.", "--set", "generation.max_tokens=7",
                 "--set", "eval.size=4", "--output", str(out)]) == 0
    return out, data


def test_final_carries_the_format_it_was_trained_with(trained):
    out, _ = trained
    saved = json.loads((out / "prompt_format.json").read_text())
    assert saved["tasks.instruction"] == "Answer with a number."
    assert saved["generation.max_tokens"] == 7
    assert (out / "sft_done.json").is_file() and not (out / "sft_checkpoint.pt").exists()


def _eval(model, data, out, *extra):
    return main(["eval", "--set", f"model.name_or_path={model}", "--dataset", str(data), "--preset", "gsm8k",
                 "--limit", "3", "--temperature", "0", "--set", f"output_dir={out}", *extra])


def test_eval_prompts_a_trained_model_as_it_was_trained_and_says_so(trained, tmp_path, capsys):
    model, data = trained
    assert _eval(model, data, tmp_path / "e1") == 0
    err = capsys.readouterr().err
    assert f"prompt format: as {str(model)!r} was trained" in err and "Answer with a number." in err
    lines = [json.loads(x) for x in (tmp_path / "e1" / "archive.jsonl").read_text().splitlines()]
    assert lines and all(x["prompt"].endswith("Answer with a number.") for x in lines)
    assert json.loads((tmp_path / "e1" / "summary.json").read_text())["max_tokens"] == 7


def test_a_format_the_command_sets_wins_and_the_line_says_so(trained, tmp_path, capsys):
    model, data = trained
    assert _eval(model, data, tmp_path / "e2", "--set", "tasks.instruction=Reply now.") == 0
    err = capsys.readouterr().err
    assert "this command's own tasks.instruction" in err
    lines = [json.loads(x) for x in (tmp_path / "e2" / "archive.jsonl").read_text().splitlines()]
    assert all(x["prompt"].endswith("Reply now.") for x in lines)


def test_a_folder_without_a_format_changes_nothing(tmp_path):
    from reasoning_rl.config import load
    from reasoning_rl.config.sections import Config

    (tmp_path / "config.json").write_text("{}")
    cfg = load(Config, None, [f"model.name_or_path={tmp_path}"])
    assert prompt_format.adopt(cfg, set()) == (cfg, "")


@pytest.mark.parametrize("text, says", [
    ("{not json", "not valid JSON"),                      # broken file: where it breaks
    ('{"tasks.instructions": "x"}', "unknown key 'tasks.instructions'"),  # a key no format has
    ("[1, 2]", "expected an object"),                     # not an object
])
def test_a_broken_format_file_is_one_line_naming_it(tmp_path, text, says):
    (tmp_path / prompt_format.FILE).write_text(text)
    with pytest.raises(ConfigError, match=says) as e:
        prompt_format.read(str(tmp_path))
    assert str(tmp_path) in str(e.value) and "\n" not in str(e.value)


def test_given_keys_are_what_the_file_and_the_overrides_set(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("tasks:\n  instruction: x\ngeneration:\n  max_tokens: 9\n")
    assert given_keys(str(f), ["model.lora.r=4", "tasks.reward=[]"]) == {
        "tasks.instruction", "generation.max_tokens", "model.lora.r", "tasks.reward"}
