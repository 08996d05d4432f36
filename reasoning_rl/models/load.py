"""Load the policy: the embedded tiny model (built or from its SFT cache) or any HF causal LM.

One config value, `model.name_or_path`, switches between them. Nothing is downloaded
for the tiny model or a named model (models/sources.py: a GGUF file a package ships, converted
once); a hub name is passed to `from_pretrained` as is (it needs network or a local HF cache,
which is the user's business).
"""
from __future__ import annotations

from ..config.sections import Config
from .device import resolve_device  # noqa: F401 - re-exported: models.resolve_device
from ..errors import UserError
from .sources import gguf_path, resolve
from .sft import build_sft_checkpoint
from .tiny.model import build_tiny  # noqa: F401 - re-exported: models.build_tiny is the public name
from .tiny.tokenizer import build_char_tokenizer

_HUB_TIMEOUT = 10.0  # seconds to ask the Hub whether a model name exists (none is spent for a local path)


def check_model_source(name: str, gguf_file: str = "", key: str = "model.name_or_path") -> None:
    """Raise UserError (one line naming `key`, model.name_or_path by default) unless `name` can be loaded: "tiny", a
    named model whose package is installed, a GGUF file (or a folder + model.gguf_file), a local directory with a
    config.json, LoRA adapters whose base can be loaded, a Hub name in the local Hugging Face cache, or one the Hub
    answers for within a short timeout. Runs before anything is loaded, so a typo costs seconds, not a traceback."""
    import os

    if gguf_path(name, gguf_file, key) or name == "tiny":  # the GGUF settings first: tiny + gguf_file is an error too
        return
    if os.path.isdir(name):
        from .lora import adapter_base

        base = adapter_base(name)
        if base is not None:  # LoRA adapters (a run's final/): loaded merged into the base model they name
            return check_model_source(base, "", key=f"{key} (the base of the adapters in {name!r})")
        if not os.path.isfile(os.path.join(name, "config.json")):
            raise UserError(f"{key}: directory {name!r} holds no config.json (not a saved Hugging Face model, nor "
                            "LoRA adapters)")
        return
    parts = name.split("/")
    looks_local = name.startswith((".", "/", "~")) or os.sep in name and len(parts) != 2 or name.endswith(os.sep)
    if os.path.exists(name) or looks_local or not all(parts) or len(parts) > 2:
        raise UserError(f"{key}: {name!r} is not a directory holding a saved model (nor a Hub name "
                        "'owner/model')")
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache(name, "config.json"), str):
        return
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        raise UserError(f"{key}: {name!r} is not a local directory and not in the Hugging Face cache "
                        "(HF_HUB_OFFLINE is set)")
    from huggingface_hub import HfApi

    try:
        HfApi().model_info(name, timeout=_HUB_TIMEOUT)
    except Exception as e:  # noqa: BLE001 - any failure to reach or find it is the same message to the user
        raise UserError(f"{key}: {name!r} is not a local directory, not in the Hugging Face cache, and the Hub "
                        f"did not answer for it ({type(e).__name__}); download it first or give a local path") from e


def quiet_transformers() -> None:
    """Keep transformers' progress bars ("Loading weights", "Writing model shards", the GGUF conversion) and its
    deprecation warnings out of a run's log; its errors still show. TRANSFORMERS_VERBOSITY set by the user wins."""
    import os
    import warnings

    if os.environ.get("TRANSFORMERS_VERBOSITY"):
        return
    from transformers.utils import logging

    logging.disable_progress_bar()
    logging.set_verbosity_error()
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"transformers(\.|$)")


def load_policy(cfg: Config, log=print):
    """(model, tokenizer) as the config asks, in eval mode, on model.device in model.dtype."""
    import torch

    quiet_transformers()
    m = cfg.model
    name = m.name_or_path
    check_model_source(name, m.gguf_file)
    device = resolve_device(m.device)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[m.dtype]
    if name == "tiny":
        if not m.sft_warm_start:
            model, tok = build_tiny(cfg)
            return _place(model, device, dtype, m.gradient_checkpointing), tok
        name = build_sft_checkpoint(cfg, log=log)
    model, tok = load_pretrained(cfg, name, m.gguf_file, log=log)
    return _place(model, device, dtype, m.gradient_checkpointing), tok


def load_pretrained(cfg: Config, name: str, gguf_file: str = "", log=print):
    """(model, tokenizer) of a saved causal LM: a folder, a GGUF file, a named model or a Hub name, in model.dtype
    (not placed, not in eval mode). The policy's and a distillation teacher's one path."""
    import torch
    from transformers import AutoModelForCausalLM

    import os

    from .lora import adapter_base

    quiet_transformers()
    m = cfg.model
    base = adapter_base(name) if os.path.isdir(name) else None
    name = resolve(name, gguf_file, m.dtype, log=log) if base is None else name
    tok = load_tokenizer(cfg, name)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[m.dtype]
    if base is not None:  # a PEFT folder (a LoRA run's final/): its adapters merged into the base they name
        from peft import PeftModel

        base_model = AutoModelForCausalLM.from_pretrained(resolve(base, "", m.dtype, log=log), dtype=dtype,
                                                          trust_remote_code=m.trust_remote_code)
        model = PeftModel.from_pretrained(base_model, name).merge_and_unload()
        # no folder holds these merged weights: new adapters on them must be saved with them (lora.save_final),
        # never as adapters of the base they were merged into
        model.name_or_path = model.config.name_or_path = ""
    else:
        model = AutoModelForCausalLM.from_pretrained(name, dtype=dtype, trust_remote_code=m.trust_remote_code)
        if os.path.isdir(name):  # new adapters on it name their base by a path that holds from any directory
            model.name_or_path = model.config.name_or_path = os.path.abspath(name)
    if tok.pad_token_id is not None and model.config.pad_token_id is None:
        model.config.pad_token_id = tok.pad_token_id
    return model, tok


def load_tokenizer(cfg: Config, name: str | None = None):
    """The policy's tokenizer (left padding; EOS as pad when it has none); cheap, so `task check` and the input
    checks render prompts with it before any model loads."""
    from transformers import AutoTokenizer

    if name is None:
        m = cfg.model
        name = m.name_or_path if m.name_or_path == "tiny" else resolve(m.name_or_path, m.gguf_file, m.dtype)
    if name == "tiny":
        return build_char_tokenizer()
    tok = AutoTokenizer.from_pretrained(name, trust_remote_code=cfg.model.trust_remote_code)
    if tok.pad_token is None:
        if tok.eos_token is None:
            raise UserError(f"model.name_or_path: the tokenizer of {name!r} has neither a pad nor an EOS token")
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok


def _place(model, device: str, dtype, gradient_checkpointing: bool):
    model = model.to(device=device, dtype=dtype)
    if gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    return model.eval()


def autocast(enabled: bool, model=None):
    """A context that runs forward passes in bfloat16 where `enabled` (autocast on the model's device type:
    cuda, or cpu with oneDNN), else a no-op. Log-probs and losses are upcast to float32 by their callers."""
    import contextlib

    import torch

    if not enabled:
        return contextlib.nullcontext()
    device = model.device.type if model is not None and hasattr(model, "device") else (
        "cuda" if torch.cuda.is_available() else "cpu")
    return torch.autocast(device, dtype=torch.bfloat16)
