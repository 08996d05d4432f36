"""A recipe's record on disk, `DIR/recipe.json`: the stages planned, the config they run with, and where each stands.

    Record.start(out, stages, config)   a new recipe's record (written at once)
    Record.read(out) -> Record | None   the record a directory holds
    record.stage(folder) -> StageState  one stage's state; record.save() writes the whole record atomically

A stage is `pending`, `running` (started, not finished: a kill leaves it so), `stopped` (by Ctrl-C or SIGTERM, with
whatever its run kept), `failed` (its error kept) or `done` (trained, saved and scored). Seconds add up over the
invocations a stage took. Not here: what a stage does (stages.py), the order and the resume rules (run.py).
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

FILE = "recipe.json"


@dataclass
class StageState:
    """One stage's place in the recipe: its folder (`k-name`), state, the model it left, its seconds and scores."""
    name: str
    folder: str
    state: str = "pending"
    final: str = ""
    train_seconds: float = 0.0  # wall seconds of its training, over every invocation
    cpu_seconds: float = 0.0  # this process's CPU seconds over them (what other jobs on the machine do not inflate)
    eval_seconds: float = 0.0
    eval: dict = field(default_factory=dict)  # the held-out scores (eval/summary.json's metrics)
    error: str = ""


@dataclass
class Record:
    """Every stage's state and the config the recipe runs with (what a resume must match)."""
    out: str
    config: dict
    stages: list[StageState]
    seconds: float = 0.0  # wall seconds of the whole recipe, over every invocation

    @classmethod
    def start(cls, out: str, stages: list[str], config: dict) -> "Record":
        rec = cls(out, config, [StageState(name, f"{k}-{name}") for k, name in enumerate(stages)])
        rec.save()
        return rec

    @classmethod
    def read(cls, out: str) -> "Record | None":
        path = os.path.join(out, FILE)
        if not os.path.isfile(path):
            return None
        with open(path) as f:
            data = json.load(f)
        return cls(out, data["config"], [StageState(**s) for s in data["stages"]], data.get("seconds", 0.0))

    def save(self) -> None:
        os.makedirs(self.out, exist_ok=True)
        path = os.path.join(self.out, FILE)
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump({"config": self.config, "seconds": round(self.seconds, 1),
                       "stages": [asdict(s) for s in self.stages]}, f, indent=1)
        os.replace(tmp, path)

    def folder(self, st: StageState) -> str:
        return os.path.join(self.out, st.folder)
