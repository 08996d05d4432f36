"""The prompt format a model was trained with, kept beside it so that later commands prompt it the same way.

    of(cfg) -> dict                    the format knobs' values (FORMAT_KEYS) in a run's config
    write(folder, cfg)                 folder/prompt_format.json (every trained model's `final/` gets one)
    read(folder) -> dict | None        what a model folder carries, or None
    adopt(cfg, given) -> (cfg, note)   cfg with the format of the model it loads, for the keys the command did not
                                       set itself (`given`); `note` says which it used, and from where

A model fine-tuned on `system prompt + question + instruction` through its chat template, with completions of a
certain length (and, trained in episodes with a tool, with that tool at hand), answers best when asked the same way. `reasoning-rl eval --set model.name_or_path=RUN/final` on
another data set therefore takes the system prompt, instruction, template, chat-template switch (a base model's
plain template and stop strings) and completion length from `RUN/final/prompt_format.json` unless the command gives them (a config file, `--set`), and says in one
line which it used. Not here: rendering a prompt (task/task.py), saving the model (models/lora.py).
"""
from __future__ import annotations

import json
import os

from .knobs import ConfigError, from_dict, to_dict

FILE = "prompt_format.json"
# what shapes the text the model sees and the length it may answer in
FORMAT_KEYS = ("tasks.system_prompt", "tasks.instruction", "tasks.template", "tasks.chat_template",
               "tasks.plain_template", "generation.max_tokens", "generation.stop",
               # a model trained in episodes with a tool answers in them: evaluations run the same environment
               "grpo.environment", "grpo.tool_format", "grpo.max_turns", "grpo.max_tool_calls",
               "grpo.max_episode_tokens")


def _get(cfg, key: str):
    node = cfg
    for part in key.split("."):
        node = getattr(node, part, None)
        if node is None:
            return None
    return node


def of(cfg) -> dict:
    """The format knobs of `cfg` that it has (a key an older config lacks is left out), as JSON values."""
    out = {}
    for key in FORMAT_KEYS:
        value = _get(cfg, key)
        if value is not None:
            out[key] = list(value) if isinstance(value, tuple) else value
    return out


def write(folder: str, cfg) -> str:
    path = os.path.join(folder, FILE)
    with open(path, "w") as f:
        json.dump(of(cfg), f, indent=1)
    return path


def read(folder: str) -> dict | None:
    """The format a model folder carries, or None (no folder, no file). A file that is not a JSON object of known
    keys is a ConfigError naming it."""
    path = os.path.join(folder, FILE)
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    if not isinstance(data, dict) or any(k not in FORMAT_KEYS for k in data):
        bad = next((k for k in data if k not in FORMAT_KEYS), None) if isinstance(data, dict) else None
        raise ConfigError(f"{path}: expected an object of {', '.join(FORMAT_KEYS)}"
                          + (f"; unknown key {bad!r}" if bad else ""))
    return data


def adopt(cfg, given: set[str]):
    """(cfg, note): cfg with the prompt format of the model folder model.name_or_path names, for every format key
    not in `given` (the keys the command set: its config file, --set); `note` is "" when the folder carries none."""
    folder = cfg.model.name_or_path
    saved = read(folder) if isinstance(folder, str) and os.path.isdir(folder) else None
    if not saved:
        return cfg, ""
    taken = {k: v for k, v in saved.items() if k not in given and _get(cfg, k) is not None}
    kept = sorted(k for k in saved if k in given)
    data = to_dict(cfg)
    for key, value in taken.items():
        section, name = key.split(".")
        data[section][name] = value
    cfg = from_dict(type(cfg), data) if taken else cfg
    used = ", ".join(f"{k}={v!r}" for k, v in taken.items() if v not in ("", [], None)) or "its defaults"
    note = f"prompt format: as {folder!r} was trained ({used})"
    if kept:
        note += f"; this command's own {', '.join(kept)}"
    return cfg, note
