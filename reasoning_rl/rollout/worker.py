"""The `worker` rollout engine: the `hf` engine in a generation process of its own, with weight pushes.

    engine = WorkerEngine(model, tokenizer, workdir, num_threads=1)
    engine.generate(prompts, n, sampling) -> list[Group]      # as HFEngine, computed in the other process
    engine.update_weights(model)                              # a live model, or a snapshot with the same state
    engine.close()

The trainer's model is saved once (`save_pretrained` under `workdir/init`); a spawned process loads
it and samples with `HFEngine`, so generation holds weights of its own and can run while the
trainer updates (async rounds: trainers/pipeline.py). `update_weights` writes the model's state to
one safetensors file, every tensor under its own name (tied ones too), which the process loads in
place; the file is removed once it is loaded. Requests and answers go over a pipe, one at a time.

A generation process that dies, or a request that raises in it, is a `RolloutError` naming what
happened, never an empty round. An interrupt while a request is in flight kills the process (its
answer would be owed to nobody); a later call says so.
With LoRA adapters the process holds the merged model: the adapters are merged into their base once at the start
and at each push (models/lora.py merged_state), so it samples from the policy the trainer trains.
Not here: several generation processes, pushing the adapters alone, a device other than the trainer's.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import signal
import traceback
from typing import Sequence

from verifiers.process_backend import main_module_hidden

from ..models.lora import is_lora, merged_state, scalings
from ..types import Group
from .base import PromptRow, SamplingConfig, as_rows, save_state
from .openai import RolloutError


class _Merged:
    """A merged state dict as `save_state` reads a model."""

    def __init__(self, state: dict) -> None:
        self.state = state

    def state_dict(self) -> dict:
        return self.state


def _serve(conn, init_dir: str, tokenizer, num_threads: int, device: str, trust_remote_code: bool) -> None:
    """The generation process: load the model, then answer ("generate", rows, n, sampling), ("load", path) and
    ("stop",) with ("ok", result) or ("error", traceback). It ignores Ctrl-C at the terminal: the trainer that owns
    it decides when it stops (after the round in progress)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import torch
        from safetensors.torch import load_file
        from transformers import AutoModelForCausalLM

        from .hf import HFEngine

        torch.set_num_threads(num_threads)
        model = AutoModelForCausalLM.from_pretrained(init_dir, dtype=torch.float32,
                                                     trust_remote_code=trust_remote_code).to(device).eval()
        engine = HFEngine(model, tokenizer)
        conn.send(("ok", os.getpid()))
    except Exception:  # reported to the trainer, which raises it: the process then ends
        conn.send(("error", traceback.format_exc()))
        return
    while True:
        try:
            msg = conn.recv()
        except EOFError:  # the trainer went away
            return
        if msg[0] == "stop":
            return
        try:
            if msg[0] == "generate":
                out = engine.generate(*msg[1:])
            elif msg[0] == "load":
                model.load_state_dict({k: v.to(device) for k, v in load_file(msg[1]).items()})
                out = None
            else:
                raise ValueError(f"generation worker: unknown request {msg[0]!r}")
        except Exception:  # one request failed; the process keeps serving
            conn.send(("error", traceback.format_exc()))
            continue
        conn.send(("ok", out))


class WorkerEngine:
    def __init__(self, model, tokenizer, workdir: str, num_threads: int = 1, device: str = "cpu",
                 trust_remote_code: bool = False, start_timeout: float = 600.0) -> None:
        if tokenizer.pad_token_id is None:
            raise ValueError("worker engine: the tokenizer has no pad token; set tokenizer.pad_token")
        self.workdir = workdir
        self.scale = scalings(model) if is_lora(model) else {}  # with adapters: merged into each push
        init = os.path.join(workdir, "init")
        shutil.rmtree(init, ignore_errors=True)
        if self.scale:  # the base model's config with the merged weights: the same merge every push makes
            model.get_base_model().save_pretrained(init, state_dict=merged_state(model.state_dict(), self.scale))
        else:
            model.save_pretrained(init)
        self.pushes = 0
        ctx = mp.get_context("spawn")  # a fresh interpreter: no copy of the trainer's threads or CUDA state
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, init, tokenizer, num_threads, device, trust_remote_code),
                                daemon=True, name="rrl-generation")
        with main_module_hidden():  # a training script without a __main__ guard must not run again in it
            self.proc.start()
        child.close()
        self.broken = ""
        self.pid = self._call(None, start_timeout)

    def _call(self, msg, timeout: float | None = None):
        """Send `msg` (None: only wait for the start-up answer) and return the answer's result."""
        if self.broken:
            raise RolloutError(f"worker engine: {self.broken}; start a new engine")
        done = False
        try:
            if msg is not None:
                self.conn.send(msg)
            waited = 0.0
            while not self.conn.poll(0.5):
                waited += 0.5
                if not self.proc.is_alive():
                    self.proc.join(5)
                    self.broken = f"the generation process died (exit code {self.proc.exitcode})"
                    raise RolloutError(f"worker engine: {self.broken}")
                if timeout is not None and waited >= timeout:
                    self.broken = f"no answer from the generation process within {timeout:.0f}s"
                    raise RolloutError(f"worker engine: {self.broken}")
            kind, out = self.conn.recv()
            done = True
        except (EOFError, OSError) as e:
            self.broken = f"the generation process's pipe closed ({type(e).__name__})"
            raise RolloutError(f"worker engine: {self.broken}") from None
        finally:
            if not done:  # interrupted or failed mid-request: an answer would be owed to nobody
                self.broken = self.broken or "a request was interrupted"
                self._kill()
        if kind == "error":
            last = out.strip().splitlines()[-1] if out.strip() else "unknown error"
            raise RolloutError(f"worker engine: the generation process failed: {last}\n{out}")
        return out

    def generate(self, prompts: Sequence[PromptRow | dict | str], n: int, sampling: SamplingConfig) -> list[Group]:
        if n < 1:
            raise ValueError(f"generate: n must be >= 1, got {n}")
        return self._call(("generate", as_rows(prompts), n, sampling))

    def update_weights(self, model) -> None:
        """Have the process load `model`'s state (anything with `state_dict()`: a model or a snapshot)."""
        path = os.path.join(self.workdir, f"weights-{self.pushes + 1}.safetensors")
        save_state(_Merged(merged_state(model.state_dict(), self.scale)) if self.scale else model, path)
        try:
            self._call(("load", path))
        finally:
            os.remove(path)
        self.pushes += 1

    def _kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(10)

    def close(self) -> None:
        if self.proc.is_alive() and not self.broken:
            try:
                self.conn.send(("stop",))
                self.proc.join(10)
            except OSError:
                pass
        self._kill()
        self.conn.close()
