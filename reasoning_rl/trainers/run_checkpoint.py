"""A training run's checkpoint: what it holds, which writer writes it, and the config check before a resume.

    check_resume(cfg, algorithm, log, resume_changed)   on --resume, before anything loads: the keys changed since
                                                        the checkpoint, said; those that break the trajectory
                                                        refused unless resume_changed
    save(run, step)                                     the run's checkpoint of `step` (under a launcher every rank
                                                        calls it and writes its part)
    restore(run) -> step                                the checkpoint loaded into the run; its step

A checkpoint of the loop's run (run.py's `Run`) holds the policy, its optimiser and scheduler, every RNG the loop
draws from, the ledger, how far the metrics and the archive had got, and beyond the policy (`_extra`): the
algorithm's states (PPO: the KL controller), the monitors' history, the async pipeline's requested rounds, and every
further trained net (PPO: the critic) with its optimiser and scheduler. One process writes it whole
(`checkpoint.save`); under a launcher the weights and optimisers of the policy and of every further net go through
torch.distributed.checkpoint, each rank its shards (`checkpoint.save_ranks`), so a sharded critic is saved like the
sharded policy. Which loader reads it depends on who wrote it, not on who reads it: a checkpoint written by ranks
loads through `checkpoint.load_ranks` at any world size, one process included.

Not here: the file layout and its atomic rename (checkpoint.py), the loop itself (loop.py).
"""
from __future__ import annotations

from typing import Any

from ..config.knobs import to_dict
from ..config.sections import Config
from ..errors import UserError
from . import checkpoint
from .run import Run


def check_resume(cfg: Config, algorithm: str, log, resume_changed: bool) -> None:
    """On --resume, before anything loads: say which keys changed since the checkpoint; refuse the ones that break
    the trajectory unless `resume_changed`."""
    saved = checkpoint.saved_config(cfg.output_dir)
    if saved is None:
        log(f"resume: the checkpoint in {cfg.output_dir} does not record its config; changes cannot be checked")
        return
    harmless, breaking = checkpoint.resume_changes(saved, to_dict(cfg), algorithm)
    if breaking and not resume_changed:
        raise UserError(f"--resume: {len(breaking)} changed key(s) would not continue the same trajectory "
                        f"({'; '.join(breaking)}); undo them, or pass --resume-changed to continue anyway")
    if harmless:
        log(f"resume: changed, the trajectory kept: {'; '.join(harmless)}")
    if breaking:
        log(f"resume: changed, the trajectory departs from here (--resume-changed): {'; '.join(breaking)}")


def save(run: Run, step: int) -> None:
    """The run's checkpoint of `step`: by every rank under a launcher, else by this process."""
    if run.pipeline is not None:
        run.pipeline.drain()  # the producer draws from the sampler's RNG: let it finish before the RNGs are saved
    p = run.nets[0]
    if run.ranks.world > 1:  # every rank writes its part (torch.distributed.checkpoint)
        checkpoint.save_ranks(run.cfg.output_dir, step, p.module, p.opt, p.sched, run.rngs, run.ledger.conn,
                              run.logs, run.ranks, extra=_extra(run, nets=False), config=to_dict(run.cfg),
                              nets=_nets(run))
        return
    checkpoint.save(run.cfg.output_dir, step, p.module, p.opt, p.sched, run.rngs, run.ledger.conn, run.logs,
                    extra=_extra(run), config=to_dict(run.cfg))


def restore(run: Run) -> int:
    """Load the run's checkpoint (resharded where the world size changed, which the log says); returns its step."""
    p = run.nets[0]
    if run.ranks.world > 1 or checkpoint.written_by_ranks(run.cfg.output_dir):  # any world size, resharded
        step, note = checkpoint.load_ranks(run.cfg.output_dir, p.module, p.opt, p.sched, run.rngs, run.logs,
                                           run.ranks, extra=_extra(run, nets=False), nets=_nets(run))
        if note:
            run.log(note)
    else:
        step = checkpoint.load(run.cfg.output_dir, p.module, p.opt, p.sched, run.rngs, run.logs, extra=_extra(run))
    run.log(f"resumed from {run.path(checkpoint.NAME)} at step {step}")
    return step


def _extra(run: Run, nets: bool = True) -> dict[str, Any]:
    """What a checkpoint holds beyond the policy: the algorithm's states and every further net's scheduler, and
    with `nets` its weights and optimiser (under a launcher those go through torch.distributed.checkpoint: `_nets`)."""
    # the monitors' history (a resumed run watches the same way) and the rounds already requested
    extra = dict(run.states, monitors=run.monitors)
    if run.pipeline is not None:
        extra["pipeline"] = run.pipeline
    for n in run.nets[1:]:
        extra[f"{n.name}_sched"] = n.sched
        if nets:
            extra.update({n.name: n.module, f"{n.name}_opt": n.opt})
    return extra


def _nets(run: Run) -> dict[str, tuple]:
    """Every further net's (weights, optimiser), for a checkpoint under a launcher."""
    return {n.name: (n.module, n.opt) for n in run.nets[1:]}
