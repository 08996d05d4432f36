"""Checkpoints that let a killed run continue the same trajectory.

A checkpoint holds the model (with LoRA, its adapters alone: a few MB), optimiser and scheduler states, every RNG the loop draws from
(torch's global generator, which `generate` samples with, and the Python generators of the
sampler and the minibatch shuffle), the step, a consistent copy of the curriculum ledger
(SQLite backup API), and how many lines metrics.jsonl and archive.jsonl had, so a resumed
run truncates what the killed run wrote after it. Written to a temporary directory and
renamed into place; the previous one is moved aside first and removed last. A kill at any
moment leaves the new checkpoint, or the previous one (put back by `run_dir.recover_checkpoint`, which `exists`,
`load` and `save` call first), never a partial one; the leftovers of a killed save are removed.
`extra` holds any further stateful objects a trainer has (PPO: the critic, its optimiser and
scheduler, the adaptive KL controller), each with `state_dict` / `load_state_dict`. The run's config
is saved beside the states (`config.json`), so `--resume` can say what changed (`resume_changes`).
"""
from __future__ import annotations

import json
import os
import shutil
import sqlite3

from ..models import lora
from ..data.run_dir import recover_checkpoint

NAME = "checkpoint"


def _lines(path: str) -> int:
    if not os.path.exists(path):
        return 0
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


# what may change on --resume and keep the run's trajectory: how long it runs, how it is watched and logged
KEEP_TRAJECTORY = ("output_dir", "eval.size", "monitor.", "{algo}.steps", "{algo}.eval_every", "{algo}.eval_at_start",
                   "{algo}.eval_at_end", "{algo}.checkpoint_every", "{algo}.verifier_workers")
OTHER_TRAINERS = ("grpo.", "ppo.", "distill.", "dpo.", "prm.")  # another trainer's section is not read by this one


def resume_changes(saved: dict, now: dict, algo: str) -> tuple[list[str], list[str]]:
    """(changes that keep the trajectory, changes that break it) between the config a checkpoint was written with and
    the config of the resuming run, each as 'key: old -> new'. Breaking: anything that changes the data, the
    sampling, the reward, the model, the reference or the optimiser."""
    before, after = _flat(saved), _flat(now)
    keep = [k.format(algo=algo) for k in KEEP_TRAJECTORY]
    harmless, breaking = [], []
    for key in sorted(set(before) | set(after)):
        if before.get(key) == after.get(key):
            continue
        line = f"{key}: {before.get(key)!r} -> {after.get(key)!r}"
        unread = key.startswith(OTHER_TRAINERS) and not key.startswith(f"{algo}.")
        (harmless if unread or any(key == k or (k.endswith(".") and key.startswith(k)) for k in keep)
         else breaking).append(line)
    return harmless, breaking


def saved_config(output_dir: str) -> dict | None:
    """The config the checkpoint in `output_dir` was written with (None for a checkpoint older than this record)."""
    path = os.path.join(output_dir, NAME, "config.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def save(output_dir: str, step: int, model, opt, sched, rngs: dict, ledger_conn: sqlite3.Connection,
         logs: tuple[str, ...], extra: dict | None = None, config: dict | None = None) -> str:
    """Write the checkpoint of `step` (see the module docstring). Interrupted (a second Ctrl-C), it leaves the
    previous checkpoint and no temporary copy."""
    recover_checkpoint(output_dir, NAME)
    final = os.path.join(output_dir, NAME)
    tmp = f"{final}.tmp-{os.getpid()}"
    done = False
    try:
        _write(tmp, step, model, opt, sched, rngs, ledger_conn, logs, extra, config)
        old = f"{final}.old-{os.getpid()}"
        if os.path.exists(final):
            os.replace(final, old)
        os.replace(tmp, final)
        done = True
        shutil.rmtree(old, ignore_errors=True)
    finally:
        if not done:
            recover_checkpoint(output_dir, NAME)
    return final


def _write(tmp: str, step: int, model, opt, sched, rngs: dict, ledger_conn: sqlite3.Connection,
           logs: tuple[str, ...], extra: dict | None, config: dict | None) -> None:
    import torch

    os.makedirs(tmp)
    torch.save({"step": step, "model": lora.trained_state(model), "opt": opt.state_dict(), "sched": sched.state_dict(),
                "torch_rng": torch.get_rng_state(), "py_rngs": {k: r.getstate() for k, r in rngs.items()},
                "log_lines": {os.path.basename(p): _lines(p) for p in logs},
                "extra": {k: o.state_dict() for k, o in (extra or {}).items()}}, os.path.join(tmp, "state.pt"))
    if config is not None:
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(config, f, indent=1)
    dst = sqlite3.connect(os.path.join(tmp, "ledger.sqlite"))
    try:
        ledger_conn.backup(dst)
    finally:
        dst.close()


def restore_ledger(output_dir: str, ledger_path: str) -> None:
    """Put the checkpoint's ledger in place (before the run opens it)."""
    src = os.path.join(output_dir, NAME, "ledger.sqlite")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(ledger_path + suffix):
            os.remove(ledger_path + suffix)
    shutil.copyfile(src, ledger_path)


def load(output_dir: str, model, opt, sched, rngs: dict, logs: tuple[str, ...], extra: dict | None = None) -> int:
    """Restore states and truncate the logs; returns the checkpoint's step."""
    import torch

    recover_checkpoint(output_dir, NAME)
    path = os.path.join(output_dir, NAME, "state.pt")
    if not os.path.exists(path):
        raise FileNotFoundError(f"--resume: no checkpoint at {path}")
    state = torch.load(path, weights_only=False)
    lora.load_trained_state(model, state["model"])
    opt.load_state_dict(state["opt"])
    sched.load_state_dict(state["sched"])
    torch.set_rng_state(state["torch_rng"])
    for k, r in rngs.items():
        r.setstate(state["py_rngs"][k])
    for k, o in (extra or {}).items():
        if k not in state.get("extra", {}):
            raise ValueError(f"--resume: the checkpoint at {path} has no {k!r} state (written by another trainer?)")
        o.load_state_dict(state["extra"][k])
    for p in logs:
        keep = state["log_lines"].get(os.path.basename(p), 0)
        if os.path.exists(p):
            with open(p, "rb") as f:
                lines = f.readlines()[:keep]
            with open(p, "wb") as f:
                f.writelines(lines)
    return int(state["step"])


FINISHED = "finished.json"


class Finished(Exception):
    """`--resume` of a run that has finished every step it is asked for: nothing to do (the message says so and how
    to extend it)."""


def mark_finished(output_dir: str, algo: str, steps: int, checkpoint_step: int | None) -> None:
    """Record that the run ended after `steps` steps, and the step its checkpoint holds (what an extension resumes
    from; None when it wrote none)."""
    import time

    with open(os.path.join(output_dir, FINISHED + ".tmp"), "w") as f:
        json.dump({"algorithm": algo, "steps": steps, "checkpoint_step": checkpoint_step,
                   "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, f)
    os.replace(os.path.join(output_dir, FINISHED + ".tmp"), os.path.join(output_dir, FINISHED))


def check_finished(output_dir: str, algo: str, steps: int) -> None:
    """Before a resume: a run that finished `steps` steps or more is Finished (nothing to do); one extended past its
    end needs a checkpoint of its last step, or the rounds after the checkpoint it has would be run again (a UserError
    saying so)."""
    path = os.path.join(output_dir, FINISHED)
    if not os.path.exists(path):
        return
    with open(path) as f:
        done = json.load(f)
    if steps <= done["steps"]:
        raise Finished(f"the run in {output_dir} finished all its {done['steps']} steps (final/ holds its model); "
                       f"nothing to do. To extend it: --resume --set {algo}.steps=N with N > {done['steps']}")
    if done.get("checkpoint_step") != done["steps"]:
        from ..errors import UserError

        raise UserError(f"--resume: {output_dir!r} finished at step {done['steps']} but its checkpoint holds step "
                        f"{done.get('checkpoint_step')} ({algo}.checkpoint_every=0 writes none at the end); extending "
                        "it would run again rounds it logged: start a new run from its final/ model instead")


def exists(output_dir: str) -> bool:
    recover_checkpoint(output_dir, NAME)
    return os.path.exists(os.path.join(output_dir, NAME, "state.pt"))


def save_final(output_dir: str, model, tok, merged: bool = False) -> str:
    """The trained policy and its tokenizer in output_dir/final (what `load_policy` and `eval` read): with LoRA, the
    adapters (and with `merged` the merged model in final/merged; lora.save_final)."""
    return lora.save_final(output_dir, model, tok, merged=merged)
