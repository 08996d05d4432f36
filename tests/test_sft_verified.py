"""Fine-tuning on verified samples (rejection sampling, ReST-EM): `curate` writes every verified sample, `sft
--samples` trains on the passed ones (several per prompt), an episode as its ids with the tool's output masked."""
from __future__ import annotations

import json

import pytest

from reasoning_rl.data.verified import read_targets
from reasoning_rl.errors import UserError

from .helpers.hf_model import write_jsonl

# (row, include_failed, kept?): which rows of a plain samples file become targets
ROWS = [
    ({"prompt": "1+1=", "completion": "2", "passed": True}, False, True),
    ({"prompt": "1+1=", "completion": "3", "passed": False}, False, False),   # failed: out by default
    ({"prompt": "1+1=", "completion": "3", "passed": False}, True, True),     # ... in with --all-samples
    ({"prompt": "2+2=", "completion": "4", "status": "correct"}, False, True),
    ({"prompt": "2+2=", "completion": "5", "status": "UNPARSEABLE"}, False, False),
    ({"prompt": "2+2=", "completion": "?", "status": "timeout"}, False, False),  # masked: never a target
    ({"prompt": "2+2=", "completion": "?", "status": "error"}, True, False),     # ... not even with --all-samples
    ({"prompt": "3+3=", "completion": "6"}, True, True),                        # no verdict: only with --all-samples
]


@pytest.mark.parametrize("row, include_failed, kept", ROWS)
def test_which_rows_are_targets(tmp_path, row, include_failed, kept):
    path = write_jsonl(tmp_path / "s.jsonl", [row, {"prompt": "9+9=", "completion": "18", "passed": True}])
    targets, summary = read_targets(str(path), include_failed=include_failed)
    assert [t.completion for t in targets] == ([row["completion"]] if kept else []) + ["18"]
    assert all(not t.rendered for t in targets)  # a plain file's prompts are the user's text, rendered later


def test_several_samples_per_prompt_are_kept_and_duplicates_counted(tmp_path):
    rows = [{"prompt": "p", "completion": c, "passed": True} for c in ("a", "b", "a")]
    targets, summary = read_targets(str(write_jsonl(tmp_path / "s.jsonl", rows)))
    assert [t.completion for t in targets] == ["a", "b"] and summary.prompts == 1 and summary.duplicates == 1
    assert summary.line() == "2 targets of 1 prompts from 3 samples; left out: 1 duplicate"


def test_a_file_without_completions_or_verdicts_is_one_line(tmp_path):
    with pytest.raises(UserError, match=r"row 0 has no 'completion' text \(columns: \['passed', 'prompt'\]\)"):
        read_targets(str(write_jsonl(tmp_path / "a.jsonl", [{"prompt": "p", "passed": True}])))
    with pytest.raises(UserError, match="row 0: passed must be true or false, got 'yes'"):
        read_targets(str(write_jsonl(tmp_path / "b.jsonl", [{"prompt": "p", "completion": "c", "passed": "yes"}])))
    with pytest.raises(UserError, match="row 0: status 'great' is none of"):
        read_targets(str(write_jsonl(tmp_path / "c.jsonl", [{"prompt": "p", "completion": "c", "status": "great"}])))


def test_an_episode_is_a_target_as_its_ids_with_the_tools_output_masked():
    """encode_pairs trains a sampled episode's ids where its loss mask is 1 (the model's tokens), never on the
    observation's, and appends nothing; a text completion gets the tokenizer's ids and EOS, all trained."""
    from reasoning_rl.models.sft import encode_pairs
    from reasoning_rl.models.tiny.tokenizer import build_char_tokenizer

    tok = build_char_tokenizer()
    episode = ([11, 12, 13, 14, 15, 16], [1, 1, 0, 0, 1, 1])  # model, model, tool, tool, model, model
    ids, attn, resp = encode_pairs(tok, ["ab", "ab"], [episode, "xy"])
    p = len(tok("ab")["input_ids"])
    assert ids[0, p:p + 6].tolist() == episode[0] and resp[0, p:p + 6].tolist() == episode[1]
    assert resp[0, :p].sum() == 0 and attn[0].sum() == p + 6
    text = tok("xy", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    assert ids[1, p:p + len(text)].tolist() == text and resp[1].sum() == len(text)


def test_curate_writes_every_verified_sample_and_sft_trains_on_the_passed_ones(tmp_path, capsys):
    """The tiny model's warm start: curate 16 prompts x 4 (its samples.jsonl holds all 64 with their verdicts), then
    `sft --samples` on them: the passed samples are the targets, the model is saved, held-out accuracy printed."""
    from reasoning_rl.cli import main

    cur, out = tmp_path / "cur", tmp_path / "sft"
    assert main(["curate", "--limit", "16", "-n", "4", "-o", str(cur), "--set", "generation.max_tokens=24"]) == 0
    lines = [json.loads(x) for x in (cur / "samples.jsonl").read_text().splitlines()]
    rows = [json.loads(x) for x in (cur / "data.jsonl").read_text().splitlines()]
    assert len(lines) == 64 and all(set(x["verdicts"]) == {"math"} for x in lines)
    passed = sum(x["verdicts"]["math"]["status"] == "correct" for x in lines)
    assert passed == sum(r["passes"] for r in rows) > 0
    targets, summary = read_targets(str(cur / "samples.jsonl"))
    assert summary.verifier == "math" and summary.targets + summary.duplicates == passed
    assert all(t.rendered for t in targets)  # the archive keeps the prompt as the model saw it
    capsys.readouterr()
    assert main(["sft", "--samples", str(cur / "samples.jsonl"), "--steps", "3", "--output", str(out),
                 "--set", "eval.size=16", "--set", "generation.max_tokens=24"]) == 0
    printed = capsys.readouterr()
    assert f"sft on verified samples: {summary.line()}" in printed.err
    assert "held-out accuracy: " in printed.out and (out / "config.json").exists()


def test_curate_samples_at_the_configs_temperature_and_records_who_sampled(tmp_path, capsys):
    """`curate --model` used to sample at temperature 1.0 whatever generation.temperature said, and its samples did
    not say which model drew them: at temperature 0 the four samples of a prompt are one greedy text, and every line
    of samples.jsonl names the model and the temperature."""
    from reasoning_rl.cli import main

    cur = tmp_path / "cur"
    assert main(["curate", "--limit", "6", "-n", "4", "-o", str(cur), "--set", "model.sft_warm_start=false",
                 "--set", "model.tiny.num_layers=1", "--set", "generation.max_tokens=6",
                 "--set", "generation.temperature=0"]) == 0
    assert "samples 4 per prompt at temperature 0" in capsys.readouterr().err
    lines = [json.loads(x) for x in (cur / "samples.jsonl").read_text().splitlines()]
    by_prompt: dict = {}
    for x in lines:
        by_prompt.setdefault(x["prompt_id"], set()).add(x["text"])
        assert x["sampled"]["model"] == "tiny" and x["sampled"]["temperature"] == 0.0
    assert len(by_prompt) == 6 and all(len(texts) == 1 for texts in by_prompt.values())


def test_a_plain_samples_files_prompts_are_rendered_with_the_chat_template(tmp_path):
    """A user's (prompt, completion, passed) rows: the prompt is rendered as the task renders its own (here a ChatML
    template), so the model trains on the text it will be asked."""
    from reasoning_rl import config
    from reasoning_rl.config import Config
    from reasoning_rl.models.load import load_tokenizer
    from reasoning_rl.task.task import Task

    from .helpers.hf_model import build_hf_model, gsm8k_rows

    model_dir = build_hf_model(tmp_path / "m", [r["question"] + r["answer"] for r in gsm8k_rows(40)])
    data = write_jsonl(tmp_path / "d.jsonl", gsm8k_rows(30))
    cfg = config.load(Config, overrides=[f"model.name_or_path={model_dir}", f"tasks.source={data}",
                                         "tasks.preset=gsm8k"])
    task = Task.from_config(cfg.tasks)
    tok = load_tokenizer(cfg)
    task.render(tok)
    assert task.render_prompt(tok, "What is 2+2?") == "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
