"""The embedded default's SFT checkpoint cache under concurrent builders (two launched ranks, two commands): a
complete folder (one holding `sft_meta.json`, written last) is never removed by a second builder."""
import json

from reasoning_rl.models.sft import _publish


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
