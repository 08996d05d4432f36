"""Where a trainer's per-step metrics go: JSONL always, TensorBoard when installed, Weights &
Biases when installed and asked for, and a `rich` progress bar with ETA on a terminal.

One `MetricsWriter` per run; `write(m)` takes the step's flat dict of floats (plus "step").
Not here: metric computation (the trainers own it) and any aggregation across ranks.
"""
from __future__ import annotations

import json
import os
import sys


class MetricsWriter:
    def __init__(self, output_dir: str, total_steps: int, *, append: bool = False, tensorboard: bool = True,
                 wandb_project: str | None = None, progress: bool | None = None, description: str = "train") -> None:
        self.path = os.path.join(output_dir, "metrics.jsonl")
        if not append:
            open(self.path, "w").close()
        self.tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(os.path.join(output_dir, "tensorboard"))
            except ImportError:  # tensorboard is optional here; JSONL always works
                self.tb = None
        self.wandb = None
        if wandb_project:
            try:
                import wandb

                self.wandb = wandb.init(project=wandb_project, dir=output_dir)
            except ImportError:
                print("metrics: wandb_project is set but wandb is not installed; logging to JSONL/TensorBoard only",
                      file=sys.stderr)
        self.progress = None
        if progress if progress is not None else sys.stderr.isatty():
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self.progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                                     TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), transient=True)
            self.progress.start()
            self.task = self.progress.add_task(description, total=total_steps)

    def write(self, m: dict) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(m) + "\n")
        step = int(m.get("step", 0))
        scalars = {k: float(v) for k, v in m.items() if k != "step" and isinstance(v, (int, float))}
        if self.tb is not None:
            for k, v in scalars.items():
                self.tb.add_scalar(k, v, step)
            self.tb.flush()
        if self.wandb is not None:
            self.wandb.log(scalars, step=step)
        if self.progress is not None:
            self.progress.update(self.task, completed=step)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()
