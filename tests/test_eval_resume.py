"""`reasoning-rl eval` keeps its work: every finished batch is in the archive at once; stopped at a batch boundary,
in mid-batch (a second signal), or by SIGTERM after the batch in progress, `--resume` goes on and ends with the
uninterrupted evaluation's samples and metrics; the summary splits format from correctness."""
from __future__ import annotations

import json
import signal

import pytest

from reasoning_rl.cli import main

MODEL = ["--set", "model.sft_warm_start=false", "--set", "model.tiny.num_layers=1", "--set", "generation.max_tokens=6",
         "--set", "eval.batch_prompts=4"]


def _eval(out, *extra):
    return main(["eval", *MODEL, "--limit", "12", "-n", "2", "--set", f"output_dir={out}", *extra])


def _result(out) -> tuple[dict, list[str]]:
    summary = json.loads((out / "summary.json").read_text())
    summary.pop("seconds")
    summary.pop("config")
    lines = sorted((out / "archive.jsonl").read_text().splitlines())
    return summary, lines


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    out = tmp_path_factory.mktemp("whole") / "eval"
    assert _eval(out) == 0
    return _result(out)


def _stop_in_batch(monkeypatch, batch: int, how):
    """Run `how` inside the sampling of batch `batch` (1-based): a Ctrl-C pressed, or a signal sent, mid-batch."""
    import reasoning_rl.eval.sampled as sampled

    real, calls = sampled.sample_verified, [0]

    def wrapped(*a, **k):
        calls[0] += 1
        if calls[0] == 2 * batch - 1:  # each batch samples twice: n samples, then the greedy one
            how()
        return real(*a, **k)

    monkeypatch.setattr(sampled, "sample_verified", wrapped)


def test_the_summary_splits_format_from_correctness_with_standard_errors(whole):
    summary, lines = whole
    assert len(lines) == 12 * 2 + 12  # n samples and the greedy one per prompt
    for key in ("greedy", "parseable", "cut", "pass@1", "avg@2"):
        assert 0.0 <= summary[key] <= 1.0 and f"{key}_se" in summary


def test_a_second_signal_in_mid_batch_keeps_the_finished_batches_and_resume_ends_the_same(tmp_path, whole, monkeypatch,
                                                                                           capsys):
    out = tmp_path / "eval"

    def ctrl_c():
        raise KeyboardInterrupt

    _stop_in_batch(monkeypatch, 2, ctrl_c)
    assert _eval(out) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "reasoning-rl eval: interrupted; stopped at once (its finished batches are kept; continue with the same "
        "command and --resume)")
    kept = (out / "archive.jsonl").read_text().splitlines()
    assert len(kept) == 4 * 3 and not (out / "summary.json").exists()  # batch 1 (4 prompts x 3 samples), whole
    monkeypatch.undo()
    assert _eval(out, "--resume") == 0
    assert _result(out) == whole


def test_sigterm_stops_after_the_batch_in_progress_and_resume_ends_the_same(tmp_path, whole, monkeypatch, capsys):
    out = tmp_path / "eval"
    _stop_in_batch(monkeypatch, 2, lambda: signal.raise_signal(signal.SIGTERM))
    assert _eval(out) == 130
    text = capsys.readouterr().err
    assert "SIGTERM: stopping after the batch in progress (the finished ones are kept); a second signal stops at " \
           "once" in text
    err = text.strip().splitlines()
    assert err[-1].startswith("reasoning-rl eval: stopped by SIGTERM after 8 of 12 prompts (accuracy ")
    assert err[-1].endswith(f"so far); samples and verdicts in {out}/archive.jsonl; continue with the same command "
                            "and --resume")
    assert len((out / "archive.jsonl").read_text().splitlines()) == 2 * 4 * 3  # batches 1 and 2
    monkeypatch.undo()
    assert _eval(out, "--resume") == 0
    assert "eval --resume: 8 of 12 prompts kept from the stopped evaluation (its 2 finished batches); going on from " \
           "prompt 9" in capsys.readouterr().err
    assert _result(out) == whole


def test_a_half_written_batch_is_cut_and_a_finished_or_another_evaluation_is_not_resumed(tmp_path, whole, capsys):
    out = tmp_path / "eval"
    assert _eval(out) == 0
    # as if killed while batch 3 was being written: a progress file of 2 batches and part of the third's lines
    progress = json.loads((out / "eval_progress.json").read_text())
    lines = (out / "archive.jsonl").read_text().splitlines()
    (out / "eval_progress.json").write_text(json.dumps(dict(progress, batches=2, lines=24)))
    (out / "archive.jsonl").write_text("\n".join(lines[:30]) + "\n" + lines[30][:20])
    (out / "summary.json").unlink()
    assert _eval(out, "--resume") == 0
    assert _result(out) == whole
    capsys.readouterr()
    assert _eval(out, "--resume") == 0  # finished: nothing to do
    assert "holds a finished evaluation (summary.json); nothing to do" in capsys.readouterr().err
    (out / "summary.json").unlink()
    assert main(["eval", *MODEL, "--limit", "12", "-n", "4", "--set", f"output_dir={out}", "--resume"]) == 2
    assert "eval --resume: the evaluation in" in capsys.readouterr().err
