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
scheduler, the adaptive KL controller), each with `state_dict` / `load_state_dict`; under a launcher the further
trained models and their optimisers (`nets`) go through torch.distributed.checkpoint with the policy instead.
The run's config is saved beside the states (`config.json`), so `--resume` can say what changed (`resume_changes`).

Under a launcher (`save_ranks` / `load_ranks`: every rank calls them) the weights and the optimiser state go
through `torch.distributed.checkpoint` (`dcp/`: each rank writes its shards under FSDP2, replicated tensors
once under DDP), each rank's random state to `rank<R>.pt`, and rank 0 writes the rest as above (`world` says how
many ranks wrote it); the folder must be one all ranks can reach. Such a checkpoint resumes under any world size:
the weights and moments are resharded as they load, a rank with a saved random state continues it and one without
starts from its run's seed, and the log says so (the trajectory departs from the uninterrupted one only then). A
one-process checkpoint resumes under a launcher the same way (its whole state, sharded on load).
"""
from __future__ import annotations

import json
import os
import shutil
import sqlite3

from ..config.knobs import flatten
from ..models import lora
from ..data.run_dir import recover_checkpoint

NAME = "checkpoint"


def _lines(path: str) -> int:
    if not os.path.exists(path):
        return 0
    with open(path, "rb") as f:
        return sum(1 for _ in f)


# what may change on --resume and keep the run's trajectory: how long it runs, how it is watched and logged
KEEP_TRAJECTORY = ("output_dir", "eval.size", "monitor.", "{algo}.steps", "{algo}.eval_every", "{algo}.eval_at_start",
                   "{algo}.eval_at_end", "{algo}.checkpoint_every", "{algo}.verifier_workers")
OTHER_TRAINERS = ("grpo.", "ppo.", "distill.", "dpo.", "prm.")  # another trainer's section is not read by this one


def resume_changes(saved: dict, now: dict, algo: str) -> tuple[list[str], list[str]]:
    """(changes that keep the trajectory, changes that break it) between the config a checkpoint was written with and
    the config of the resuming run, each as 'key: old -> new'. Breaking: anything that changes the data, the
    sampling, the reward, the model, the reference or the optimiser."""
    before, after = flatten(saved), flatten(now)
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
    _write_config_and_ledger(tmp, config, ledger_conn)


def _write_config_and_ledger(tmp: str, config: dict | None, ledger_conn: sqlite3.Connection) -> None:
    if config is not None:
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(config, f, indent=1)
    dst = sqlite3.connect(os.path.join(tmp, "ledger.sqlite"))
    try:
        ledger_conn.backup(dst)
    finally:
        dst.close()


def save_ranks(output_dir: str, step: int, model, opt, sched, rngs: dict, ledger_conn, logs: tuple[str, ...],
               ranks, extra: dict | None = None, config: dict | None = None, nets: dict | None = None) -> str:
    """The checkpoint of `step` under a launcher; every rank calls it (see the module docstring). Rank 0 alone
    needs `ledger_conn`, `logs`, `extra` and `config`; the others' are ignored. `nets`: further trained models,
    {name: (module, optimiser)} (PPO's critic), saved through torch.distributed.checkpoint like the policy."""
    import torch
    import torch.distributed.checkpoint as dcp

    final = os.path.join(output_dir, NAME)
    tmp = f"{final}.tmp-step{step}"  # one name on every rank
    if ranks.main:
        recover_checkpoint(output_dir, NAME)
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
    ranks.barrier()
    dcp.save(_dcp_state(model, opt, nets), checkpoint_id=os.path.join(tmp, "dcp"))
    torch.save({"torch_rng": torch.get_rng_state(), "py_rngs": {k: r.getstate() for k, r in rngs.items()}},
               os.path.join(tmp, f"rank{ranks.rank}.pt"))
    if ranks.main:
        torch.save({"step": step, "format": "dcp", "world": ranks.world, "sched": sched.state_dict(),
                    "log_lines": {os.path.basename(p): _lines(p) for p in logs},
                    "extra": {k: o.state_dict() for k, o in (extra or {}).items()}}, os.path.join(tmp, "state.pt"))
        _write_config_and_ledger(tmp, config, ledger_conn)
    ranks.barrier()  # every rank's files are in before the folder moves into place
    if ranks.main:
        old = f"{final}.old-step{step}"
        if os.path.exists(final):
            os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    ranks.barrier()
    return final


def _dcp_state(model, opt, nets: dict | None) -> dict:
    """What torch.distributed.checkpoint saves and loads: the policy's and each further net's weights and optimiser."""
    state = {"model": _model_state(model), "optim": _optim_state(model, opt)}
    for name, (module, net_opt) in (nets or {}).items():
        state[name], state[f"{name}_optim"] = _model_state(module), _optim_state(module, net_opt)
    return state


def _trained_names(model) -> set[str] | None:
    """With LoRA the adapters' names (a checkpoint keeps only them), else None (everything)."""
    return {n for n, p in model.named_parameters() if p.requires_grad} if lora.is_lora(model) else None


def _model_state(model) -> dict:
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    state, keep = get_model_state_dict(model), _trained_names(model)
    return state if keep is None else {k: v for k, v in state.items() if k in keep}


def _optim_state(model, opt) -> dict:
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    return get_optimizer_state_dict(model, opt)


def _by_name(model, opt_state: dict) -> dict:
    """A one-process checkpoint's optimiser state (keyed by position in the trainable parameters, as
    `Optimizer.state_dict` writes it) keyed by parameter name, the form `set_optimizer_state_dict` loads whole."""
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    state = {names[i]: v for i, v in opt_state["state"].items()}
    groups = [{**g, "params": [names[i] for i in g["params"]]} for g in opt_state["param_groups"]]
    return {"state": state, "param_groups": groups}


def load_ranks(output_dir: str, model, opt, sched, rngs: dict, logs: tuple[str, ...], ranks,
               extra: dict | None = None, nets: dict | None = None) -> tuple[int, str | None]:
    """Restore any checkpoint under a launcher (every rank calls it); returns (its step, a line saying what a change
    of world size did, or None). `nets` as `save_ranks`'s; a one-process checkpoint holds them among its extras."""
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, set_model_state_dict,
                                                         set_optimizer_state_dict)

    recover_checkpoint(output_dir, NAME) if ranks.main else None
    ranks.barrier()
    folder = os.path.join(output_dir, NAME)
    path = os.path.join(folder, "state.pt")
    if not os.path.exists(path):
        raise FileNotFoundError(f"--resume: no checkpoint at {path}")
    state = torch.load(path, weights_only=False)
    strict = _trained_names(model) is None
    nets = nets or {}
    if state.get("format") == "dcp":
        sd = _dcp_state(model, opt, nets)
        dcp.load(sd, checkpoint_id=os.path.join(folder, "dcp"))
        set_model_state_dict(model, sd["model"], options=StateDictOptions(strict=strict))
        set_optimizer_state_dict(model, opt, sd["optim"])
        for name, (module, net_opt) in nets.items():
            set_model_state_dict(module, sd[name], options=StateDictOptions(strict=_trained_names(module) is None))
            set_optimizer_state_dict(module, net_opt, sd[f"{name}_optim"])
        mine = os.path.join(folder, f"rank{ranks.rank}.pt")
        random_state = torch.load(mine, weights_only=False) if os.path.exists(mine) else None
        world = int(state["world"])
    else:  # a one-process checkpoint: its whole state, sharded as it loads
        full = StateDictOptions(full_state_dict=True, strict=strict)
        set_model_state_dict(model, state["model"], options=full)
        set_optimizer_state_dict(model, opt, _by_name(model, state["opt"]), options=full)
        for name, (module, net_opt) in nets.items():  # a one-process run kept them among its extras
            if name not in state.get("extra", {}):
                raise ValueError(f"--resume: the checkpoint at {path} has no {name!r} state (written by another "
                                 f"trainer?)")
            set_model_state_dict(module, state["extra"][name], options=full)
            set_optimizer_state_dict(module, net_opt, _by_name(module, state["extra"][f"{name}_opt"]), options=full)
        random_state = state if ranks.main else None
        world = 1
    sched.load_state_dict(state["sched"])
    if random_state is not None:
        torch.set_rng_state(random_state["torch_rng"])
        for k, r in rngs.items():
            r.setstate(random_state["py_rngs"][k])
    _restore_extra(path, state, extra)
    if ranks.main:
        _truncate(logs, state["log_lines"])
    ranks.barrier()
    note = None
    if world != ranks.world:
        kept = min(world, ranks.world)
        note = (f"resumed a checkpoint written by {world} process(es) with {ranks.world}: the weights and the "
                f"optimiser state were resharded as they loaded; rank(s) 0..{kept - 1} continue their saved random "
                f"state" + (f", rank(s) {kept}..{ranks.world - 1} start from the run's seed" if ranks.world > world
                            else "") + f", and each rank now samples {1}/{ranks.world} of the prompts: the trajectory "
                f"departs from the uninterrupted {world}-process one")
    return int(state["step"]), note


def _restore_extra(path: str, state: dict, extra: dict | None) -> None:
    for k, o in (extra or {}).items():
        if k not in state.get("extra", {}):
            raise ValueError(f"--resume: the checkpoint at {path} has no {k!r} state (written by another trainer?)")
        o.load_state_dict(state["extra"][k])


def _truncate(logs: tuple[str, ...], kept: dict) -> None:
    for p in logs:
        keep = kept.get(os.path.basename(p), 0)
        if os.path.exists(p):
            with open(p, "rb") as f:
                lines = f.readlines()[:keep]
            with open(p, "wb") as f:
                f.writelines(lines)


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
    _restore_extra(path, state, extra)
    _truncate(logs, state["log_lines"])
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


def written_by_ranks(output_dir: str) -> bool:
    """Whether the checkpoint in `output_dir` was written under a launcher (`save_ranks`: load it with
    `load_ranks`, whatever the world size now)."""
    import torch

    path = os.path.join(output_dir, NAME, "state.pt")
    return os.path.exists(path) and torch.load(path, weights_only=False).get("format") == "dcp"


def exists(output_dir: str) -> bool:
    recover_checkpoint(output_dir, NAME)
    return os.path.exists(os.path.join(output_dir, NAME, "state.pt"))


def save_final(output_dir: str, model, tok, cfg) -> str:
    """The trained policy, its tokenizer and prompt format in output_dir/final (what `load_policy` and `eval` read):
    with LoRA, the adapters (and with model.lora.save_merged the merged model in final/merged; lora.save_final)."""
    return lora.save_final(output_dir, model, tok, merged=cfg.model.lora.save_merged, cfg=cfg)
