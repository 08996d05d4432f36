"""Where a run writes, and the rule that no run overwrites another by accident.

- `output_dir` left empty (the default): each run gets a new directory `runs/<command>-<UTC time>`
  (a suffix -2, -3, ... if two start in the same second), so running a command twice keeps both runs.
- `output_dir` named: if it already holds a run (any of `RUN_FILES`), the command refuses to start
  unless `--resume` (continue it from its checkpoint) or `--overwrite` (remove those files first:
  only the files a run writes, by name; nothing else in the directory is touched).
- `--resume` needs a named `output_dir` that holds a checkpoint.

The check runs before a model is loaded, so a refused command has touched nothing.
`written_together(output)` is how a command that writes its results at its end (eval, curate, pairs, reverify)
writes them: all of them or none, so a Ctrl-C while they are written leaves none half-written.
Not here: locking against two processes that start on one directory at the same moment.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import time
from typing import Iterator

from ..errors import UserError

# everything a training run or the demo writes into its output_dir
RUN_FILES = ("metrics.jsonl", "archive.jsonl", "ledger.sqlite", "checkpoint", "final", "tensorboard", "demo.png",
             "weights", "engine-init", "dpo_ours", "dpo_trl", "task.json", "reverify", "run_config.json",
             "report.html", "finished.json", "eval_progress.json", "summary.json")


def run_files(path: str) -> list[str]:
    """The run files present in `path` (empty when it holds no run)."""
    return [f for f in RUN_FILES if os.path.exists(os.path.join(path, f))]


def new_run_dir(command: str, root: str = "runs") -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path, n = os.path.join(root, f"{command}-{stamp}"), 1
    while os.path.exists(path):
        n += 1
        path = os.path.join(root, f"{command}-{stamp}-{n}")
    return path


def recover_checkpoint(output_dir: str, name: str = "checkpoint") -> None:
    """After a checkpoint save that was killed (trainers/checkpoint.py writes `name.tmp-PID`, moves the previous one
    to `name.old-PID`, renames the new one into place, then removes the old): put the previous checkpoint back if
    the new one never took its place, and remove the leftovers (a temporary copy, possibly partial)."""
    import glob

    final = os.path.join(output_dir, name)
    aside = sorted(glob.glob(f"{glob.escape(final)}.old-*"), key=os.path.getmtime)
    if not os.path.exists(final) and aside:
        os.replace(aside.pop(), final)  # the new one never arrived: the previous one is the checkpoint
    for leftover in aside + glob.glob(f"{glob.escape(final)}.tmp-*"):
        shutil.rmtree(leftover, ignore_errors=True)


def claim(path: str, command: str, *, resume: bool = False, overwrite: bool = False, key: str = "output_dir",
          checkpoint_name: str = "checkpoint", resume_file: str = "") -> str:
    """The directory this run may write to (see the module docstring); raises UserError naming `key`. `resume_file`:
    what a resumable run of this command leaves (default: its checkpoint, checkpoint_name/state.pt)."""
    if resume and overwrite:
        raise UserError("--resume and --overwrite exclude each other: continue the run, or replace it")
    if not path:
        if resume:
            what = "the directory of the stopped run" if resume_file else "a run directory with a checkpoint"
            raise UserError(f"--resume needs the run to continue: --set {key}=DIR ({what})")
        return new_run_dir(command)
    if os.path.exists(path) and not os.path.isdir(path):
        raise UserError(f"{key}: {path!r} is a file, not a directory")
    present = run_files(path) if os.path.isdir(path) else []
    if resume:
        recover_checkpoint(path, checkpoint_name)
        marker = resume_file or os.path.join(checkpoint_name, "state.pt")
        if not os.path.exists(os.path.join(path, marker)):
            raise UserError(f"--resume: {key} {path!r} holds no {'checkpoint' if not resume_file else 'record'} "
                            f"({marker}); start without --resume")
        return path
    if present and not overwrite:
        raise UserError(f"{key} {path!r} already holds a run ({', '.join(present)}); pass --resume to continue it, "
                        f"--overwrite to replace it, or another --set {key}=DIR")
    for f in present:  # --overwrite: only what a run writes
        p = os.path.join(path, f)
        shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    return path


@contextlib.contextmanager
def written_together(output: str) -> Iterator[str]:
    """A folder to write a command's results into (`output.tmp-PID`, beside `output`). When the block ends without
    an exception its entries replace those of the same name in `output` (created if missing; nothing else there is
    touched), one rename each; on an exception, Ctrl-C included, the folder is removed and `output` is as before."""
    output = output.rstrip("/") or "."
    staging = f"{output}.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    try:
        yield staging
        os.makedirs(output, exist_ok=True)
        for name in sorted(os.listdir(staging)):
            src, dest = os.path.join(staging, name), os.path.join(output, name)
            if os.path.isdir(dest) and not os.path.islink(dest):
                shutil.rmtree(dest)
            elif os.path.isdir(src) and os.path.lexists(dest):
                os.remove(dest)
            os.replace(src, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


REPORT = "report.html"
STALE = ('"stale":false', '"stale":true')  # how report.html's embedded data says whether the run went on since


def mark_report_stale(output_dir: str) -> bool:
    """A run that goes on (resumed, extended) marks the report written of it before as stale: the page then says so
    and how to rebuild it. Returns whether there was one to mark."""
    path = os.path.join(output_dir, REPORT)
    if not os.path.isfile(path):
        return False
    with open(path, encoding="utf-8") as f:
        page = f.read()
    if STALE[0] not in page:
        return False
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(page.replace(STALE[0], STALE[1], 1))
    os.replace(path + ".tmp", path)
    return True
