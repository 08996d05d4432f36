"""A supervised run of a model other than the embedded tiny one, kept safe as the RL runs are: a checkpoint every
`sft.checkpoint_every` steps, a clean stop on Ctrl-C or SIGTERM (after the step in progress, with a checkpoint of
it), `--resume` from there, and the trained model in its folder with the prompt format it trained on.

    run_sft(cfg, model, tok, rows, out, resume=False, log=print) -> SFTResult

`out` is the model's folder (`sft --output DIR`): while the run goes it holds `sft_checkpoint.pt`; at the end the
model (a Hugging Face folder, or with LoRA the adapters), `prompt_format.json` and `sft_done.json`, and the checkpoint
is removed. A run whose folder says it is done is not trained again (`Finished`); a checkpoint written with another
config (rows, model, learning rate, ...) is refused on resume, naming what changed.

Not here: the step itself and the tiny model's cached warm start (models/sft.py), where targets come from (the
task's gold completions, verified samples: cli/data.py).
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

from ..config.knobs import changes, to_dict
from ..config.sections import Config
from ..errors import UserError
from ..interrupts import Interrupted, stop_requests
from ..models import lora
from ..models.sft import SFTState, seed_everything, sft_state, train_sft

CHECKPOINT = "sft_checkpoint.pt"
DONE = "sft_done.json"
# config keys a resumed run may change without leaving the trajectory it was on (and the sections it does not read)
KEEP = ("sft.steps", "sft.log_every", "sft.checkpoint_every", "output_dir", "eval.", "num_threads", "cpu_allocator",
        "grpo.", "ppo.", "distill.", "dpo.", "prm.", "monitor.", "recipe.")


class Finished(Exception):
    """The folder holds a finished run; the message says so."""


@dataclass(frozen=True)
class SFTResult:
    """What a run did: its model's folder, its steps (all of them, a resumed run's earlier ones included), its last
    loss, the seconds this invocation trained, and the step it resumed from (0: a fresh run)."""
    path: str
    steps: int
    loss: float | None
    seconds: float
    resumed_from: int = 0


def check_output(out: str, resume: bool, steps: int) -> None:
    """Before anything loads: a finished run raises Finished (with --resume: nothing to do, or how to extend it); a
    stopped one needs --resume; --resume needs a checkpoint."""
    done, ckpt = os.path.join(out, DONE), os.path.join(out, CHECKPOINT)
    if os.path.isfile(done):
        with open(done) as f:
            ran = json.load(f).get("steps")
        if resume and ran is not None and steps > ran:
            raise UserError(f"sft --resume: {out!r} holds a finished run of {ran} steps; the checkpoint it continued "
                            f"from was removed when it finished, so it cannot be extended to {steps}: start a new "
                            "run from it (--set model.name_or_path=" + out + ")")
        raise Finished(f"{out!r} holds a finished run ({ran} steps, {DONE}); nothing to do")
    if resume and not os.path.isfile(ckpt):
        raise UserError(f"sft --resume: {out!r} holds no checkpoint ({CHECKPOINT}); start without --resume")
    if not resume and os.path.isfile(ckpt):
        raise UserError(f"sft --output {out!r} holds a stopped run ({CHECKPOINT}); continue it with --resume, or "
                        "choose another folder")


def _save(path: str, state: SFTState, model, cfg: Config, rows: int) -> None:
    """The run's state, written to a temporary file and renamed into place: a kill leaves the old one or the new."""
    import torch

    tmp = f"{path}.tmp-{os.getpid()}"
    torch.save({"step": state.step, "model": lora.trained_state(model), "opt": state.opt.state_dict(),
                "sched": state.sched.state_dict(), "rng": state.rng.getstate(), "torch_rng": torch.get_rng_state(),
                "rows": rows, "config": to_dict(cfg)}, tmp)
    os.replace(tmp, path)


def _restore(path: str, cfg: Config, model, rows: int, log) -> SFTState:
    import torch

    saved = torch.load(path, map_location="cpu", weights_only=False)
    changed = changes(saved["config"], to_dict(cfg), KEEP)
    if saved["rows"] != rows:
        changed.insert(0, f"targets: {saved['rows']} -> {rows}")
    if changed:
        raise UserError(f"sft --resume: the run in {os.path.dirname(path)!r} was made with another config "
                        f"({'; '.join(changed[:4])}); run it as it was, or start a new one")
    lora.load_trained_state(model, saved["model"])
    state = sft_state(cfg, model, log=lambda *_: None)
    state.opt.load_state_dict(saved["opt"])
    state.sched.load_state_dict(saved["sched"])
    state.rng.setstate(saved["rng"])
    torch.set_rng_state(saved["torch_rng"])
    state.step = saved["step"]
    log(f"sft: resumed from its checkpoint at step {state.step} of {cfg.sft.steps}")
    return state


def run_sft(cfg: Config, model, tok, rows: list[dict], out: str, resume: bool = False, log=print) -> SFTResult:
    """Train `model` on `rows` (models/sft.py targets) into the folder `out` (module docstring). A first Ctrl-C or
    SIGTERM stops after the step in progress with a checkpoint and raises Interrupted; the final save is not cut
    short by one."""
    os.makedirs(out, exist_ok=True)
    ckpt, s = os.path.join(out, CHECKPOINT), cfg.sft
    if resume:
        state = _restore(ckpt, cfg, model, len(rows), log)
    else:
        seed_everything(cfg.seed)
        state = sft_state(cfg, model, log)
    first, t0 = state.step, time.time()

    with stop_requests(log, after="the step in progress, with a checkpoint") as stop:
        def after_step(st: SFTState) -> bool:
            if stop.signal is not None and st.step < s.steps:
                _save(ckpt, st, model, cfg, len(rows))
                return True
            if s.checkpoint_every and st.step % s.checkpoint_every == 0 and st.step < s.steps:
                _save(ckpt, st, model, cfg, len(rows))
            return False

        state = train_sft(cfg, model, tok, rows, log=log, state=state, after_step=after_step)
        seconds = time.time() - t0
        if state.step < s.steps:
            raise Interrupted(f"stopped by {stop.signal} after step {state.step} of {s.steps}; checkpoint in {ckpt}; "
                              "continue with the same command and --resume")
        parent, name = os.path.split(os.path.abspath(out))
        path = lora.save_final(parent, model, tok, name=name, merged=cfg.model.lora.save_merged, cfg=cfg)
        with open(os.path.join(out, DONE), "w") as f:
            json.dump({"steps": state.step, "targets": len(rows), "loss": state.loss,
                       "seconds": round(seconds, 1)}, f, indent=1)
        if os.path.exists(ckpt):
            os.remove(ckpt)
    return SFTResult(path, state.step, state.loss, seconds, first)
