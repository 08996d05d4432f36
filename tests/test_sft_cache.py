"""The embedded default's SFT checkpoint cache under concurrent builders (two launched ranks, two commands, test
workers): a builder waits while another holds the checkpoint's lock, and a complete folder (one holding
`sft_meta.json`, written last) is never removed by a second builder."""
import fcntl
import json
import subprocess
from pathlib import Path

from reasoning_rl import config
from reasoning_rl.config import Config
from reasoning_rl.models.sft import _publish, sft_cache_dir

from .conftest import PY, run_env


def _folder(path, complete: bool, tag: str):
    path.mkdir(parents=True)
    (path / "weights").write_text(tag)
    if complete:
        (path / "sft_meta.json").write_text(json.dumps({"tag": tag}))
    return path


def test_a_complete_folder_published_meanwhile_is_kept_and_ours_dropped(tmp_path):
    out = _folder(tmp_path / "sft-x", True, "theirs")
    tmp = _folder(tmp_path / "sft-x.tmp-2", True, "ours")
    assert _publish(str(tmp), str(out), force=False) == str(out)
    assert (out / "weights").read_text() == "theirs" and not tmp.exists()


def test_an_incomplete_folder_is_replaced(tmp_path):
    out = _folder(tmp_path / "sft-x", False, "partial")  # a builder killed before its move left this
    tmp = _folder(tmp_path / "sft-x.tmp-2", True, "ours")
    _publish(str(tmp), str(out), force=False)
    assert (out / "weights").read_text() == "ours" and (out / "sft_meta.json").exists() and not tmp.exists()


def test_force_replaces_a_complete_folder_and_a_missing_one_is_created(tmp_path):
    out = _folder(tmp_path / "a" / "sft-x", True, "old")
    tmp = _folder(tmp_path / "sft-x.tmp-2", True, "new")
    _publish(str(tmp), str(out), force=True)
    assert (out / "weights").read_text() == "new"
    fresh = tmp_path / "b" / "sft-y"
    _publish(str(_folder(tmp_path / "sft-y.tmp-3", True, "first")), str(fresh), force=False)
    assert (fresh / "weights").read_text() == "first"


_BUILD = """
import sys
from reasoning_rl import config
from reasoning_rl.config import Config
from reasoning_rl.models.sft import build_sft_checkpoint
cfg = config.load(Config, overrides=sys.argv[1:])
print("built", build_sft_checkpoint(cfg, log=lambda m: print(m, flush=True)), flush=True)
"""


def test_a_second_builder_waits_for_the_first_and_trains_nothing(tmp_path, monkeypatch):
    """Two processes asking for the same checkpoint (test workers, launched ranks) train it once: while another
    holds the checkpoint's lock, a builder says so and waits, then takes the folder the other published. Without
    the lock both trained (the second's work thrown away by `_publish`)."""
    overrides = ["model.tiny.num_layers=1", "sft.steps=20", "sft.log_every=1"]
    monkeypatch.setenv("REASONING_RL_CACHE", str(tmp_path / "cache"))
    out = Path(sft_cache_dir(config.load(Config, overrides=overrides)))
    out.parent.mkdir()
    with open(f"{out}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the first builder, at work
        proc = subprocess.Popen([PY, "-c", _BUILD, *overrides], env=run_env(), text=True, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        first = proc.stdout.readline()
        assert "another process is building" in first, first
        _folder(out, True, "the first builder's")  # its folder, published before it lets go of the lock
    rest, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and rest.strip() == f"built {out}", rest
    assert "sft step" not in first + rest and (out / "weights").read_text() == "the first builder's"
