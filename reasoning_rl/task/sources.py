"""Where a task's rows come from: local files, a `datasets` folder, or a Hub dataset, and their splits.

    read_rows(path)                          JSONL, JSON (a list), Parquet, CSV, or a save_to_disk folder
    load_split_rows(source, config, split)   one named split of any source
    split_by_hash(rows, key, percent)        (train, held-out) by a stable hash of each row's prompt

A file is one split, called "train". A `save_to_disk` folder holding a DatasetDict and a Hub
dataset have named splits. A Hub name goes through `datasets.load_dataset`; where the Hub
cannot be reached the error is one line naming the dataset. Every failure is a `UserError`
naming the source and, for a malformed line, its file:line.

Standard library only at import (`datasets` is imported when a folder, Parquet or Hub source
is read). Not here: columns, presets or prompts (task/task.py, task/presets.py).
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Callable

from ..errors import UserError

FILE_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv", ".ndjson")


def read_rows(path: str) -> list[dict]:
    """JSONL, JSON (a list), Parquet, CSV, or a `datasets` directory saved with save_to_disk (its only split, or
    its "train" split)."""
    if not os.path.exists(path):
        raise UserError(f"input {path!r} does not exist")
    if os.path.isdir(path):
        return load_split_rows(path, "", "train")
    if path.endswith(".csv"):
        import csv

        with open(path, encoding="utf-8", newline="") as f:
            return list(csv.DictReader(f))
    if path.endswith(".parquet"):
        from datasets import Dataset

        return Dataset.from_parquet(path).to_list()
    rows = []
    with open(path, encoding="utf-8") as f:
        if path.endswith(".json"):
            try:
                data = json.load(f)
            except json.JSONDecodeError as e:
                raise UserError(f"{path}:{e.lineno}: not valid JSON ({e.msg} line {e.lineno} column {e.colno})"
                                ) from None
            if not isinstance(data, list):
                raise UserError(f"{path}: a .json input must hold a list of objects")
            return data
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise UserError(f"{path}:{n}: not valid JSON ({e.msg} column {e.colno})") from None
    return rows


def _looks_like_file(source: str) -> bool:
    return source.endswith(FILE_SUFFIXES) or source.startswith((".", "/", "~")) or os.path.exists(source)


def _from_disk(path: str, split: str) -> list[dict]:
    from datasets import Dataset, DatasetDict, load_from_disk

    try:
        ds = load_from_disk(path)
    except (FileNotFoundError, ValueError) as e:
        raise UserError(f"tasks.source: {path!r} is a folder but not a datasets.save_to_disk folder "
                        f"({' '.join(str(e).split())[:120]})") from None
    if isinstance(ds, Dataset):
        if split not in ("train", ""):
            raise UserError(f"tasks.source: {path!r} holds one split (a Dataset), so split {split!r} does not exist; "
                            "leave tasks.test_split empty to hold out a share by hash")
        return ds.to_list()
    assert isinstance(ds, DatasetDict)
    if split not in ds:
        raise UserError(f"tasks: split {split!r} is not in {path!r} (splits: {sorted(ds)})")
    return ds[split].to_list()


def _from_hub(name: str, config: str, split: str) -> list[dict]:
    import datasets

    try:
        ds = datasets.load_dataset(name, config or None, split=split)
    except ValueError as e:  # an unknown split or config: the library's message names the valid ones
        raise UserError(f"tasks.source: Hub dataset {name!r} (config {config or None!r}, split {split!r}): "
                        f"{' '.join(str(e).split())[:200]}") from None
    except Exception as e:  # noqa: BLE001 - offline, unknown name, no permission: one line naming the dataset
        raise UserError(f"tasks.source: Hub dataset {name!r} could not be loaded ({type(e).__name__}: "
                        f"{' '.join(str(e).split())[:160]}); download it first (datasets save_to_disk) or give a "
                        "local file") from None
    return ds.to_list()


def load_split_rows(source: str, config: str, split: str) -> list[dict]:
    """The rows of one named split of `source` (a file is the single split "train"), or of a file named as the
    split itself (GSM8K ships train.jsonl and test.jsonl: tasks.source=train.jsonl, tasks.test_split=test.jsonl)."""
    if split not in ("train", "test", "validation") and split.endswith(FILE_SUFFIXES):
        path = os.path.expanduser(split)
        if not os.path.isfile(path):
            raise UserError(f"tasks: split {split!r} names a file, and there is no such file")
        return read_rows(path)
    if _looks_like_file(source):
        path = os.path.expanduser(source)
        if not os.path.exists(path):
            raise UserError(f"tasks.source: {source!r} does not exist")
        if os.path.isdir(path):
            return _from_disk(path, split)
        if split != "train":
            raise UserError(f"tasks: a file is one split ('train'), so split {split!r} of {source!r} does not "
                            "exist; leave tasks.test_split empty to hold out a share by hash, or give a folder")
        return read_rows(path)
    return _from_hub(source, config, split)


def stable_hash(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def split_by_hash(rows: list[Any], key: Callable[[Any], str], percent: int) -> tuple[list[Any], list[Any]]:
    """(train, held-out): a row is held out when the stable hash of key(row) falls in the first `percent` of 100,
    so the same prompt is on the same side in every run, whatever else the file holds."""
    train, test = [], []
    for r in rows:
        (test if stable_hash(key(r)) % 100 < percent else train).append(r)
    return train, test


def column(row: dict, path: str) -> Any:
    """row[path], where dots reach into nested mappings ("reward_model.ground_truth"); KeyError if absent."""
    node: Any = row
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(path)
        node = node[part]
    return node


def has_column(r: dict, path: str) -> bool:
    """Whether `column(r, path)` finds a value."""
    try:
        column(r, path)
    except KeyError:
        return False
    return True
