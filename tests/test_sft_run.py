"""`sft` of a model other than the cached tiny warm start stops as `train` does: a SIGTERM stops it after the step in
progress with a checkpoint, `--resume` ends on the weights of the uninterrupted run, a finished run is not trained
again, and a warm-up as long as the run is cut (said in one line) so the run reaches its learning rate."""
from __future__ import annotations

import json
import os
import signal

import pytest
import torch

from reasoning_rl.cli import main

TINY = ["--set", "model.sft_warm_start=false", "--set", "model.tiny.num_layers=1", "--set", "sft.batch_size=4",
        "--set", "eval.size=4", "--set", "generation.max_tokens=4", "--set", "sft.log_every=1"]


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    f = tmp_path_factory.mktemp("sft") / "samples.jsonl"
    f.write_text("".join(json.dumps({"prompt": f"{a} + {b} =", "completion": str(a + b), "passed": True}) + "\n"
                         for a in range(6) for b in range(3)))
    return f


def _sft(samples, out, *extra):
    return main(["sft", "--samples", str(samples), *TINY, "--set", "sft.steps=6", "--set", "sft.warmup_steps=2",
                 "--output", str(out), *extra])


def _weights(folder):
    from safetensors.torch import load_file

    return load_file(os.path.join(folder, "model.safetensors"))


@pytest.fixture(scope="module")
def whole(samples, tmp_path_factory):
    out = tmp_path_factory.mktemp("whole") / "model"
    assert _sft(samples, out) == 0
    return _weights(out)


def test_sigterm_stops_after_the_step_and_resume_ends_on_the_uninterrupted_weights(samples, whole, tmp_path,
                                                                                   monkeypatch, capsys):
    import reasoning_rl.models.sft as sft

    real, calls = sft.sft_step, [0]

    def step(*a, **k):
        calls[0] += 1
        if calls[0] == 3:
            os.kill(os.getpid(), signal.SIGTERM)  # mid-step: the run finishes this step, then stops
        return real(*a, **k)

    monkeypatch.setattr(sft, "sft_step", step)
    out = tmp_path / "model"
    assert _sft(samples, out) == 130
    err = capsys.readouterr().err
    assert "stopped by SIGTERM after step 3 of 6" in err and "--resume" in err
    assert (out / "sft_checkpoint.pt").is_file() and not (out / "sft_done.json").exists()
    assert _sft(samples, out) == 2  # a stopped run is not started over by accident
    assert "holds a stopped run" in capsys.readouterr().err
    monkeypatch.setattr(sft, "sft_step", real)
    assert _sft(samples, out, "--resume") == 0
    captured = capsys.readouterr()
    assert "resumed from its checkpoint at step 3 of 6" in captured.err and "resumed at step 3" in captured.out
    got = _weights(out)
    assert got.keys() == whole.keys()
    for k in whole:
        torch.testing.assert_close(got[k], whole[k], rtol=0, atol=0)  # the same steps on the same batches, bit for bit
    assert not (out / "sft_checkpoint.pt").exists()
    assert _sft(samples, out, "--resume") == 0 and "finished run" in capsys.readouterr().err


def test_resume_with_another_config_is_refused_naming_the_change(samples, tmp_path, monkeypatch, capsys):
    import reasoning_rl.models.sft as sft

    real = sft.sft_step
    monkeypatch.setattr(sft, "sft_step", lambda *a, **k: (os.kill(os.getpid(), signal.SIGTERM), real(*a, **k))[1])
    out = tmp_path / "model"
    assert _sft(samples, out) == 130
    monkeypatch.setattr(sft, "sft_step", real)
    capsys.readouterr()
    assert _sft(samples, out, "--resume", "--set", "sft.lr=0.5") == 2
    assert "sft.lr: 0.003 -> 0.5" in capsys.readouterr().err


def test_a_warm_up_as_long_as_the_run_is_cut_and_said(samples, tmp_path, capsys):
    assert main(["sft", "--samples", str(samples), *TINY, "--set", "sft.steps=5", "--output",
                 str(tmp_path / "m")]) == 0
    err = capsys.readouterr().err
    assert "sft.warmup_steps=50 is not below the run's 5 steps" in err and "warm-up cut to 0 steps" in err
    import re

    first = float(re.search(r"sft step 1/5 .* lr (\S+)", err).group(1))  # the rate the second step runs at
    assert first > 0.5 * 3e-3  # past the peak already (a 50-step warm-up would be at 2/50 of it)


def test_resume_without_a_checkpoint_is_one_line(samples, tmp_path, capsys):
    assert _sft(samples, tmp_path / "none", "--resume") == 2
    assert "holds no checkpoint" in capsys.readouterr().err
