"""The RL loop every algorithm shares: one round of sample -> verify -> filter -> update per step.

    train(cfg, algorithm, log, on_step, resume) -> (history, model, tokenizer)   on_step(metrics) -> True ends it

The loop owns what is common to GRPO and PPO: seeding and ranks, the policy and its reference,
the rollout engine, the verifier pool and reward, the curriculum (ledger, sampler, refill),
the rollout archive, metrics, held-out evaluation, checkpoints and logging. An `Algorithm`
(algorithm.py) supplies only what is its own; each hook gets a `Learner` (models, tokenizer, ranks,
reward, configs), never the loop's state, and returns its metrics:

    setup(learner)                   extra models and optimisers (PPO: the critic), as `Net`s and checkpoint states
    make_batch(learner, groups)      verified groups -> (a batch with advantages or None, metrics); on every rank
    minibatch(learner, batch, idx)   the gradient of one minibatch; returns its metrics
    touch(learner)                   a zero-loss backward through every DDP module (a rank with no rows)
    after_update(learner, metrics)   anything after a round's update (PPO: the adaptive KL controller)

One round (a "step"), for rank r of W (one process: r = 0, W = 1):
  1. the sampler draws prompts_per_step / W prompts; the engine samples group_size completions each
     from pi_old = the current weights; the verifier pool scores them; refill keeps mixed groups.
     With max_staleness = k >= 1 this round was requested k steps ago and made while earlier updates
     ran, from weights k updates old (pipeline.py);
  2. every rank's verified groups are gathered: rank 0 writes the ledger and the archive;
  3. the algorithm makes a batch; `num_iterations` epochs of shuffled minibatches update each `Net`
     (the same number of optimiser steps on every rank; DDP averages the gradients);
  4. metrics to JSONL / TensorBoard and the caller's `on_step`; held-out accuracy every `eval_every` steps (0 = off),
     before the first round and after the last (unless eval_at_start / eval_at_end are off); a resumable
     checkpoint every `checkpoint_every` steps and at the last (rank 0). A round that trains nothing says so in its
     log line. At the end, final/ and finished.json: `--resume` of a finished run does nothing and says so; with
     more steps it extends the run from its last checkpoint.

One synchronous GRPO step, file by file (tests/test_layout.py checks that every name here exists):
  trainers/loop.py         train -> _steps -> _round -> _make_round   the round, made here while the loop waits
  trainers/rounds.py       Rounds.make -> Rounds._generate  weights pushed if due; chunks generated and verified
  curricula/refill.py      fill_batch                       draw prompts, keep mixed groups, refill
  curricula/samplers.py    UniformSampler.sample            prompts by the ledger's pass rates
  rollout/hf.py            HFEngine.generate                group_size completions per prompt, with log-probs
  task/task.py             Task.verify_samples              the reward's verifiers, through the pool
  curricula/ledger.py      Ledger.update                    per-prompt pass rates (rank 0)
  data/archive.py          write_groups                     every verified sample, with its provenance
  trainers/grpo.py         GRPO.make_batch                  kept groups -> tokens and advantages
  trainers/grpo_batch.py   make_batch                       group-normalised advantages, masked samples left out
  trainers/loop.py         _update -> _train_epochs         shuffled minibatches, clipping, optimiser steps
  trainers/grpo_batch.py   update_minibatch                 the clipped surrogate (+ KL) over length buckets
  trainers/metrics.py      MetricsWriter.write              metrics.jsonl and TensorBoard
  trainers/log_lines.py    log_line                         one line a round (and why it trained nothing)

Not here: the maths (algos/), what a checkpoint of the run holds and which writer writes it
(run_checkpoint.py).
"""
from __future__ import annotations

import dataclasses
import json
import os
import random
import time
from typing import Callable

import torch

import verifiers
from curricula import Ledger, make_sampler

from ..config.knobs import to_dict
from ..config.sections import Config, RLConfig
from ..data.archive import provenance, write_groups
from ..data.run_dir import mark_report_stale, new_run_dir
from ..errors import UserError
from ..models.device import configure_process
from ..models.load import load_policy, load_tokenizer
from ..models.lora import maybe_lora, reference_of
from ..models.sft import seed_everything
from ..rollout import HFEngine, SamplingConfig, cpu_kernels, logprob_mismatch
from ..rollout.engines import make_engine
from ..rollout.openai import RolloutError
from ..rollout.environments import check_environment, prompt_tools
from ..task.check import require_parseable
from ..task.task import Task
from . import checkpoint, run_checkpoint
from .algorithm import Algorithm, Learner, Net, adamw
from .distributed import NullWriter, Ranks, grad_norm
from ..interrupts import Interrupted, stop_requests
from .log_lines import Slowdown, log_line, warn_if_idle
from .metrics import MetricsWriter
from .monitors import Monitors
from .pipeline import RoundPipeline, staleness_metrics
from .rounds import Round, Rounds, SandboxTally, WeightSync, round_metrics, round_seed
from .run import Run


def _setup(cfg: Config, algo: Algorithm, log, resume: bool, resume_changed: bool = False) -> Run:
    rl: RLConfig = getattr(cfg, algo.name)
    check_environment(rl)
    if resume:
        run_checkpoint.check_resume(cfg, algo.name, log, resume_changed)
    allocator = configure_process(cfg)  # torch's threads and the C allocator
    ranks = Ranks()  # under `accelerate launch`: this rank's share of the prompts; rank 0 writes
    if ranks.world > 1 and rl.max_staleness:
        raise UserError(f"{algo.name}.max_staleness={rl.max_staleness}: async rounds run in one process only; "
                         "set it to 0 under a launcher")
    prompts_here = ranks.share(rl.prompts_per_step, f"{algo.name}.prompts_per_step")
    log = ranks.logger(log)
    log(allocator)
    seed_everything(cfg.seed + ranks.rank)
    task = Task.from_config(cfg.tasks)  # rows read and checked before any model loads
    reward = task.reward(rl)
    pool = verifiers.VerifierPool(num_workers=rl.verifier_workers, backend=rl.verifier_backend,
                                  ray_address=os.environ.get("RAY_ADDRESS"), load_timeout=rl.verifier_load_timeout_s)
    # prompts as the model sees them (with the environment's tools in the chat format): over-long rows are dropped
    # before loading
    task.render(load_tokenizer(cfg), tools=prompt_tools(rl))
    require_parseable(task, pool)
    os.makedirs(cfg.output_dir, exist_ok=True)
    model, tok = ranks.main_first(load_policy, cfg, log=log)
    model = maybe_lora(model, cfg)  # with adapters, only they train and the reference is the base (no copy)
    if ranks.main:
        task.note_dropped(log)
        task.note_format(cfg.model.name_or_path, cfg.generation.stop, log)
    ref = ranks.wrap_frozen(reference_of(model) if rl.beta > 0 else None)  # sharded too under FSDP2
    train_rows = task.train[:rl.train_prompts] if rl.train_prompts else task.train
    by_id = {r["prompt_id"]: r for r in train_rows}
    gen = cfg.generation
    # the tiny model's prompts are a few characters: sharing their pass saves nothing, and its published trajectory
    # was sampled without it (the float noise of another batch shape moves it after ~35 rounds)
    sampling = SamplingConfig.of(gen, share_prefill=cfg.model.name_or_path != "tiny", stop=task.stops(gen.stop))
    rounds = Rounds(rl, sampling, make_engine(cfg, rl, model, tok), task, reward, pool, by_id,
                    random.Random(cfg.seed + 7919))
    ledger_path = os.path.join(cfg.output_dir, "ledger.sqlite")
    if resume and ranks.main:
        checkpoint.restore_ledger(cfg.output_dir, ledger_path)
    ledger = Ledger(ledger_path) if ranks.main else None  # rank 0 creates it; the others read it
    ranks.barrier()
    ledger = ledger or Ledger(ledger_path)
    easy = {"difficulty": task.difficulty(train_rows), "start": rl.easy_start, "widen_at": rl.easy_widen_at} \
        if rl.sampler == "easy_first" else {}
    sampler = make_sampler(rl.sampler, list(by_id), G=rl.group_size, seed=cfg.seed + ranks.rank, ledger=ledger,
                           **easy)
    wrapped = ranks.wrap(model)  # DDP under a launcher; FSDP2 shards `model` in place, so the optimiser comes after
    if sharing := ranks.describe():
        log(sharing)
    opt, sched = adamw(model, rl.lr, rl.warmup_steps)
    policy = Net("policy", model, wrapped, opt, sched, "grad_norm")
    rngs = {"sampler": sampler.rng, "shuffle": random.Random(cfg.seed)}
    if rl.control:
        rngs["control"] = rounds.control_rng  # a resumed control run draws the same shuffles
    share = rl.share_prompt_pass == "on" or rl.share_prompt_pass == "auto" and cfg.model.name_or_path != "tiny"
    learner = Learner(rl, cfg.generation, policy, ref, tok, ranks, reward, share_prompts=share)
    extra_nets, states = algo.setup(learner)
    # resumed: the engine's weights are unknown until the first round pushes the checkpoint's (version -1)
    weights = WeightSync(isinstance(rounds.engine, HFEngine), rl.push_every, version=-1 if resume else 0)
    pipeline = RoundPipeline(rounds, sampler, prompts_here, rl.max_staleness, cfg.seed + ranks.rank, weights) \
        if rl.max_staleness else None
    described = task.describe(reward)
    run = Run(cfg, rl, ranks, log, task, learner, [policy, *extra_nets], states, rounds, pool, ledger, sampler, rngs,
              task.rows("test")[:cfg.eval.size], prompts_here, Monitors(cfg.monitor, task, reward, cfg.seed), weights,
              provenance(described), pipeline)
    if ranks.main:
        with open(run.path("task.json"), "w") as f:  # how this run's samples were checked (reverify reads it)
            json.dump(described, f, indent=1)
        with open(run.path("run_config.json"), "w") as f:  # what ran (`reasoning-rl report` shows it)
            json.dump({"algorithm": algo.name, "config": to_dict(cfg)}, f, indent=1, default=str)
    return run


def _start(run: Run, algo: Algorithm, resume: bool) -> int:
    """Restore a checkpoint or score step 0; open the metrics writer. Returns the first step to run."""
    start, acc = 1, None
    if run.ranks.main:
        mark_report_stale(run.cfg.output_dir)  # a report of this directory's earlier rounds is now out of date
    if resume:
        start = run_checkpoint.restore(run) + 1
    elif run.ranks.main:
        open(run.archive_path, "w").close()
    with run.ranks.full_weights(run.model):  # FSDP2: every rank gathers the weights for what follows
        if isinstance(run.rounds.engine, HFEngine):  # auto's kernels measured before the first round, and logged
            rows = min(run.rounds.engine.batch_size, run.rl.prompts_per_step * run.rl.group_size)
            note = cpu_kernels.auto_choice(run.cfg.generation.cpu_decode, run.model, rows)
            if note and run.ranks.main:
                run.log(note)
        if not resume and run.ranks.main and run.rl.eval_at_start:  # rank 0 evaluates
            acc = run.evaluate()
            run.log(f"step 0: held-out accuracy {acc['eval/accuracy']:.3f} ({len(run.evals)} prompts, greedy; "
                    f"{acc['eval/parseable']:.3f} with a parseable answer)")
    run.ranks.barrier()
    run.writer = MetricsWriter(run.cfg.output_dir, run.rl.steps, append=resume, description=algo.name) \
        if run.ranks.main else NullWriter()
    if acc is not None:
        run.writer.write({"step": 0, **acc})
    return start


def _train_epochs(run: Run, algo: Algorithm, batch, n: int, n_mb: int) -> dict[str, float]:
    """`num_iterations` epochs of shuffled minibatches of `minibatch_size` rows; `n_mb` optimiser steps an epoch on
    every rank (a rank short of rows backpropagates a zero loss, so DDP's all-reduce still meets). Returns the
    metrics averaged over minibatches."""
    rl, stats = run.rl, {}
    for net in run.nets:
        net.module.train()
    for _ in range(rl.num_iterations):
        order = list(range(n))
        run.rngs["shuffle"].shuffle(order)
        for j in range(n_mb):
            idx = torch.tensor(order[j * rl.minibatch_size:(j + 1) * rl.minibatch_size], dtype=torch.long)
            for net in run.nets:
                net.opt.zero_grad(set_to_none=True)
            metrics = {}
            planned = algo.passes(run.learner, batch, idx) if len(idx) else 1  # FSDP2: agreed before any pass
            with run.ranks.even_passes(planned, lambda: algo.touch(run.learner)):  # pads to the busiest rank's
                if len(idx):
                    metrics = algo.minibatch(run.learner, batch, idx)
                else:  # this rank has fewer rows than another
                    algo.touch(run.learner)
            for net in run.nets:
                if rl.grad_clip > 0:
                    norm = torch.nn.utils.clip_grad_norm_(net.module.parameters(), rl.grad_clip)
                    stats.setdefault(net.grad_metric, []).append(grad_norm(norm))
                net.opt.step()
            for k, v in metrics.items():
                stats.setdefault(k, []).append(v)
    for net in run.nets:
        net.sched.step()
        net.module.eval()
    return {k: sum(v) / len(v) for k, v in stats.items()}


def _update(run: Run, algo: Algorithm, step: int, groups: list) -> dict[str, float]:
    """The algorithm's batch from this rank's kept groups, then its update. Returns the update's metrics."""
    rl = run.rl
    scoring = [run.learner.ref, *(net.module for net in run.nets)]
    with run.ranks.full_weights(*scoring):  # FSDP2: this rank's scoring passes, any number, without collectives
        batch, m = algo.make_batch(run.learner, groups)  # on every rank, even one with no groups (PPO gathers its KL)
    m = dict(m)
    n = len(batch) if batch is not None else 0
    n_mb = run.ranks.max(-(-n // rl.minibatch_size))  # the same number of optimiser steps on every rank
    if not n_mb:
        m["train/samples"] = 0  # said in the log line and counted at the end of the run, never silent
        return m
    if step % (rl.eval_every or 10) == 1 or rl.eval_every == 1:  # every 10 with evals off
        with run.ranks.full_weights(run.model):
            if batch is not None:
                m.update(logprob_mismatch(run.model, run.tok, groups[:8],
                                          temperature=run.cfg.generation.temperature or 1.0))
    with run.ranks.full_weights(run.learner.ref):  # the frozen reference scores without collectives
        m.update(_train_epochs(run, algo, batch, n, n_mb))
    m["train/samples"] = n
    m.update(algo.after_update(run.learner, m))
    return m


def _make_round(run: Run, step: int) -> Round:
    """Synchronous: round `step`, made here from the weights after update step-1 (pushed first to an engine that
    does not share them)."""
    version = step - 1
    weights = run.model if run.weights.due(version) else None
    with run.ranks.full_weights(run.model):  # FSDP2: each rank samples on whole weights, without collectives
        return run.rounds.make(step, run.sampler, run.prompts_here, run.weights.held(version),
                               round_seed(run.cfg.seed + run.ranks.rank, step), weights)


def _round(run: Run, algo: Algorithm, step: int, tally: SandboxTally) -> dict:
    """One step: make the round (or, with max_staleness >= 1, take the one requested earlier), record it, request
    the round max_staleness steps ahead, update. Returns the step's metrics (no held-out score yet)."""
    t_step = time.perf_counter()
    rl, rounds, pipe = run.rl, run.rounds, run.pipeline
    made = pipe.take(step) if pipe is not None else _make_round(run, step)
    wait = time.perf_counter() - t_step
    kept, mine = made.kept, made.generated
    generated = run.ranks.gather(mine)  # every rank's verified groups (one process: its own)
    if run.ranks.main:
        run.ledger.update(generated, rounds.reward.outcome, step, retire_after=rl.retire_after or None)
        with open(run.archive_path, "a", encoding="utf-8") as af:
            write_groups(af, generated, step, run.provenance)
    if pipe is not None and step + rl.max_staleness <= rl.steps:  # made while this step's update runs
        pipe.request(step + rl.max_staleness, step - 1, run.model, run.ledger.entries())
    m = {"step": step, **round_metrics(generated, rounds.reward), **made.refill.metrics()}
    m.update(tally.metrics(generated))  # what the sandbox did this step, if a verifier ran one
    fleet = getattr(rounds.engine, "engine", rounds.engine)  # under episodes, the engine they sample from
    if hasattr(fleet, "metrics"):  # several servers: each one's share and latency
        m.update(fleet.metrics())
    m["throughput/tokens_per_s"] = sum(len(s.token_ids) for g in mine for s in g.samples) \
        / max(1e-9, made.timing["rollout"])  # generated by this rank, over its generation time
    t0 = time.perf_counter()
    m.update(_update(run, algo, step, kept))
    m.update({f"time/{k}": v for k, v in made.timing.items()})
    m["time/update"] = time.perf_counter() - t0
    m["time/wait"] = wait  # the round's making that the update did not hide (all of it when synchronous)
    m["time/step"] = time.perf_counter() - t_step  # everything but the held-out evaluation
    m.update(staleness_metrics(generated, step))  # updates the sampling weights lagged behind (0 = on-policy)
    m["curriculum/retired"] = run.ledger.retired_count()
    if run.ranks.main:
        m.update(run.monitors.observe(step, generated, m, run.pool))
    return m


def _steps(run: Run, algo: Algorithm, first: int, tally: SandboxTally, on_step, stop) -> None:
    """Steps `first`..steps: a round, the held-out score when due, the log line, alerts, checkpoints. Stops after
    the round in progress on a stop request (Ctrl-C, SIGTERM) or an alert with monitor.stop_on_alert, with a
    checkpoint of that round."""
    rl, slow = run.rl, Slowdown()
    for step in range(first, rl.steps + 1):
        m = _round(run, algo, step, tally)
        slow.check(m, run.log)
        if rl.eval_every and step % rl.eval_every == 0 or rl.eval_at_end and step == rl.steps:
            with run.ranks.full_weights(run.model):  # FSDP2: every rank gathers the weights; rank 0 evaluates
                if run.ranks.main:
                    m.update(run.evaluate())
                    m.update(run.monitors.heldout(m, len(run.evals)))
        alerts = run.monitors.pop_alerts()
        run.history.append(m)
        run.writer.write(m)
        ended = bool(on_step(m)) if on_step else False  # the caller's word: True ends the run after this step
        run.log(log_line(m, rl.steps))
        for a in alerts:
            run.log(f"ALERT step {step}: {a}")
        # rank 0 alone watches: every rank learns of a stopping alert, so all write the checkpoint and stop together
        on_alert = bool(run.ranks.max(int(bool(alerts) and run.cfg.monitor.stop_on_alert)))
        # every rank stops after the same round: a signal seen by any rank (a launcher may reach only some) counts
        stopping = bool(run.ranks.max(int(stop.signal is not None)))
        # a run that stops, is told to, reaches checkpoint_every, or ends (what an extension resumes from)
        due = rl.checkpoint_every and (step % rl.checkpoint_every == 0 or step == rl.steps)
        if (run.ranks.main or run.ranks.world > 1) and (on_alert or stopping or due):
            run_checkpoint.save(run, step)  # under a launcher every rank writes its part
        if stopping and step < rl.steps:
            run.ranks.barrier()  # no rank leaves while rank 0 writes the checkpoint (a launcher would stop it)
            raise Interrupted(f"stopped by {stop.signal or 'a signal to another rank'} after step {step} of "
                              f"{rl.steps}; checkpoint in {run.path(checkpoint.NAME)}; continue with --resume --set "
                              f"output_dir={run.cfg.output_dir}")
        if on_alert:
            run.log(f"stopped at step {step} on the alert above (monitor.stop_on_alert); checkpoint written")
            break
        if ended:
            run.log(f"ended at step {step} of {rl.steps} by the caller (its on_step); final/ follows")
            break


def train(cfg: Config, algo: Algorithm, log: Callable[[str], None] = print,
          on_step: Callable[[dict], bool | None] | None = None, resume: bool = False, resume_changed: bool = False):
    """Run `algo` as configured. Returns (history, model, tokenizer): history is one metrics dict per step.
    `on_step(metrics)` sees each step's metrics; where it returns True the run ends after that step as if its steps
    were done there (final/ saved; not marked finished, so `--resume` can take it on). A budget of the caller's own.

    resume: continue from `output_dir/checkpoint` (the same trajectory as an uninterrupted run); a config changed
    since the checkpoint in a key that breaks the trajectory is refused unless `resume_changed`.
    The first Ctrl-C or SIGTERM stops the run after the round in progress, with a checkpoint of it, by raising
    `Interrupted`; a second one stops it at once (KeyboardInterrupt), the last complete checkpoint kept."""
    if not cfg.output_dir:  # called from Python with the default: a new run directory, as the CLI gives
        cfg = dataclasses.replace(cfg, output_dir=new_run_dir(algo.name))
        log(f"run directory: {cfg.output_dir}")
    if resume:  # before anything loads: a finished run has nothing to do; an extension needs its last step's state
        checkpoint.check_finished(cfg.output_dir, algo.name, getattr(cfg, algo.name).steps)
    try:
        run = _setup(cfg, algo, log, resume, resume_changed)
    except RolloutError as e:  # the first push to a server (the engine starts from the trainer's weights)
        raise UserError(f"{e}. The run stopped before its first round") from None
    try:
        with stop_requests(run.log, same_within_s=1.0 if run.ranks.world > 1 else 0.0) as stop:
            first = _start(run, algo, resume)
            if run.pipeline is not None:
                run.pipeline.prime(first, run.rl.steps, first - 1, run.model, run.ledger.entries())
            try:
                _steps(run, algo, first, SandboxTally(), on_step, stop)
            except RolloutError as e:  # a server that did not answer in time: one line, the checkpoint untouched
                where = run.path(checkpoint.NAME)
                kept = (f"its checkpoint in {where} is as it was (continue with --resume once the server answers)"
                        if os.path.exists(where) else "it had written no checkpoint yet")
                raise UserError(f"{e}. The run stopped; {kept}") from None
    finally:
        if run.pipeline is not None:
            run.pipeline.close()
        run.rounds.close()
        run.pool.close()
        run.ledger.close()
        if run.writer is not None:
            run.writer.close()
    model = run.ranks.gathered(run.model)  # FSDP2: the whole weights, on rank 0 (every rank takes part)
    if run.ranks.main:
        checkpoint.save_final(cfg.output_dir, model, run.tok, cfg)
        last = run.history[-1]["step"] if run.history else None
        if last == run.rl.steps:  # every step ran (not an alert's stop): the run is finished
            checkpoint.mark_finished(cfg.output_dir, algo.name, last, last if run.rl.checkpoint_every else None)
        warn_if_idle(run.history, run.log)
    run.ranks.barrier()
    return run.history, model, run.tok
