"""GRPO: sample groups, verify them, keep the mixed ones, and climb the clipped surrogate.

One round (a "step"):
  1. the curriculum sampler draws B prompts; the rollout engine samples G completions each
     with pi_old = the current weights (token ids + sampling log-probs);
  2. the verifier pool scores every sample; the outcome verifier's pass/fail feeds the ledger,
     the mixed filter and refill (DAPO dynamic sampling); the composite reward feeds advantages;
  3. A = group-normalised advantage (grpo / dr_grpo / rloo) over scored samples; masked
     samples (TIMEOUT/ERROR/ABSTAIN) are left out of the loss entirely;
  4. `num_iterations` epochs of minibatch updates on the PPO-clip objective with eps_low/eps_high,
     token aggregation by `loss_type`, optional k3 KL to a frozen reference;
  5. metrics to JSONL (and the caller's hooks), held-out greedy accuracy every `eval_every` steps;
     every verified sample to the rollout archive (archive.jsonl) for re-verification and pairs.

Checkpoints (`checkpoint_every`) hold everything a killed run needs to continue the same
trajectory with `resume=True` (see checkpoint.py).

Metrics go to JSONL and TensorBoard (`metrics.py`). PPO with a critic is `ppo.py`.
Under `accelerate launch` (or torchrun) each rank samples and verifies prompts_per_step / world
prompts, the verified groups are gathered (whole groups: advantages never see part of a group),
DDP averages the gradients of each rank's token-mean loss, and rank 0 alone writes metrics, the
archive, the ledger, checkpoints and the final model (`distributed.Ranks`).
Not here (yet): resuming a multi-process run.
"""
from __future__ import annotations

import concurrent.futures
import copy
import dataclasses
import os
import random
import time
import weakref
from typing import Callable

from ..configs import Config
from ..run_dir import new_run_dir
from . import checkpoint
from .distributed import NullWriter, Ranks
from .grpo_batch import tensors_from_groups, update_minibatch
from .metrics import MetricsWriter


def outcome_verifier(cfg) -> str:
    return "code" if cfg.tasks.kind == "code" else "math"


def _attach(groups, reward, pool):
    """Every sample of every group gets its verdicts (one concurrent batch through the pool).
    Code tasks: the program is prompt (the signature) + completion (the body), checked against the row's tests."""
    from ..curate import checked_text
    from ..types import Group

    flat = [(g, s) for g in groups for s in g.samples]
    refs = [g.task.get("tests" if reward.outcome == "code" else "answer") for g, _ in flat]
    texts = [checked_text(reward.outcome, g.prompt, s.text) for g, s in flat]
    verdicts = reward.verify(texts, refs, [g.prompt for g, _ in flat], pool=pool)
    out, k = [], 0
    for g in groups:
        samples = []
        for s in g.samples:
            samples.append(s.with_verdicts(verdicts[k]))
            k += 1
        out.append(Group(g.prompt_id, g.prompt, g.task, samples))
    return out


def _shuffle_verdicts(groups, rng: random.Random):
    """The `shuffled_rewards` control: every sample gets the verdicts of a random sample of the round, so the
    rewards keep their distribution but say nothing about the completion they are attached to."""
    from ..types import Group

    verdicts = [s.verdicts for g in groups for s in g.samples]
    rng.shuffle(verdicts)
    it = iter(verdicts)
    return [Group(g.prompt_id, g.prompt, g.task, [s.with_verdicts(next(it)) for s in g.samples]) for g in groups]


def train_grpo(cfg: Config, log: Callable[[str], None] = print, on_step: Callable[[dict], None] | None = None,
               resume: bool = False):
    """Run GRPO as configured. Returns (history, model, tokenizer): history is one metrics dict per step.

    resume: continue from `output_dir/checkpoint` (the same trajectory as an uninterrupted run)."""
    import torch

    import verifiers
    from curricula import Ledger, apply_filters, fill_batch, group_stats, make_sampler

    from ..archive import write_groups
    from ..evaluate import task_accuracy
    from ..losses import GRPO_LOSS_AGGREGATION
    from ..models import load_policy
    from ..rollout import HFEngine, SamplingConfig, logprob_mismatch
    from ..sft import seed_everything
    from ..tiny.tasks import make_rows

    g = cfg.grpo
    torch.set_num_threads(cfg.num_threads)
    ranks = Ranks()  # under `accelerate launch`: this rank's share of the prompts; rank 0 writes
    if ranks.world > 1 and resume:
        raise ValueError("train grpo --resume: resuming a multi-process run is not supported yet; "
                         "resume it with one process")
    prompts_here = ranks.share(g.prompts_per_step, "grpo.prompts_per_step")
    log = ranks.logger(log)
    seed_everything(cfg.seed + ranks.rank)
    if not cfg.output_dir:  # called from Python with the default: a new run directory, as the CLI gives
        cfg = dataclasses.replace(cfg, output_dir=new_run_dir("grpo"))
        log(f"run directory: {cfg.output_dir}")
    os.makedirs(cfg.output_dir, exist_ok=True)
    model, tok = ranks.main_first(load_policy, cfg, log=log)
    ref = copy.deepcopy(model).eval() if g.beta > 0 else None
    train_rows, test_rows = make_rows(cfg.tasks)
    by_id = {r["prompt_id"]: r for r in (train_rows[:g.train_prompts] if g.train_prompts else train_rows)}
    if g.engine == "vllm":
        from ..rollout.vllm import VLLMEngine

        init = os.path.join(cfg.output_dir, "engine-init")
        model.save_pretrained(init)
        tok.save_pretrained(init)
        engine = VLLMEngine(init, dtype="float32", seed=cfg.seed, max_model_len=cfg.model.tiny.max_position_embeddings
                            if cfg.model.name_or_path == "tiny" else None)
        engine.update_weights(model)  # a resumed run's weights, not the saved initial ones
    elif g.engine == "openai":
        from ..rollout.openai import OpenAIEngine

        engine = OpenAIEngine(g.engine_url, g.engine_model, tokenizer=tok,
                              weights_dir=g.weights_dir or os.path.join(cfg.output_dir, "weights"))
        engine.update_weights(model)  # the server starts from the trainer's weights
    else:
        engine = HFEngine(model, tok)  # samples from the very object being trained: no push needed
    outcome = outcome_verifier(cfg)
    fmt = "repetition" if outcome == "code" else "think_answer"  # the format rule that fits the task kind
    terms = [verifiers.Term(outcome, 1.0), verifiers.Term(fmt, g.format_weight)]
    if g.prm_model:  # (advantage=process without a PRM is refused when the config is built)
        from verifiers.prm import PRMConfig, PRMVerifier

        from verifiers.registry import REGISTRY, distribution

        if "prm" in verifiers.names() and distribution("prm") == "user":
            REGISTRY.remove("prm")  # an earlier run's PRM in this process
        verifiers.register(PRMVerifier(PRMConfig(model=g.prm_model), name="prm"))
        terms.append(verifiers.Term("prm", 0.0))  # step scores for the advantages; not in the scalar reward
    reward = verifiers.Reward(tuple(terms), outcome=outcome)
    pool = verifiers.VerifierPool(num_workers=g.verifier_workers, backend=g.verifier_backend,
                                  ray_address=os.environ.get("RAY_ADDRESS"))
    ledger_path = os.path.join(cfg.output_dir, "ledger.sqlite")
    if resume:
        checkpoint.restore_ledger(cfg.output_dir, ledger_path)
    ledger = Ledger(ledger_path) if ranks.main else None  # rank 0 creates it; the others read it
    ranks.barrier()
    if ledger is None:
        ledger = Ledger(ledger_path)
    sampler = make_sampler(g.sampler, list(by_id), G=g.group_size, seed=cfg.seed + ranks.rank, ledger=ledger)
    sampling = SamplingConfig(temperature=g.temperature, top_p=g.top_p, max_tokens=g.max_tokens)
    opt = torch.optim.AdamW(model.parameters(), lr=g.lr, betas=(0.9, 0.99), weight_decay=0.0)
    train_model = ranks.wrap(model)  # DDP under a launcher: gradients averaged across ranks
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(1, g.warmup_steps)))
    agg = GRPO_LOSS_AGGREGATION[g.loss_type]
    rng = random.Random(cfg.seed)
    evals = test_rows[: g.eval_size]
    history: list[dict] = []
    metrics_path = os.path.join(cfg.output_dir, "metrics.jsonl")
    archive_path = os.path.join(cfg.output_dir, "archive.jsonl")
    rngs = {"sampler": sampler.rng, "shuffle": rng}
    control_rng = random.Random(cfg.seed + 7919)
    if g.control:
        rngs["control"] = control_rng  # a resumed control run draws the same shuffles
    start = 1
    if resume:
        start = checkpoint.load(cfg.output_dir, model, opt, sched, rngs, (metrics_path, archive_path)) + 1
        log(f"resumed from {os.path.join(cfg.output_dir, checkpoint.NAME)} at step {start - 1}")
    elif ranks.main:
        open(archive_path, "w").close()
        acc = task_accuracy(model, tok, evals, pool, g.max_tokens)
        log(f"step 0: held-out accuracy {acc:.3f} ({len(evals)} prompts, greedy)")
    ranks.barrier()
    writer = MetricsWriter(cfg.output_dir, g.steps, append=resume, description="grpo") if ranks.main else NullWriter()
    if not resume and ranks.main:
        writer.write({"step": 0, "eval/accuracy": acc})
    generated_all = []
    counted = weakref.WeakValueDictionary()  # id -> code verdict already in some step's sandbox totals
    verifying = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="verify")  # overlaps generation

    def keep(grp) -> bool:  # DAPO dynamic sampling on the outcome's pass/fail
        return not g.filter_mixed or bool(apply_filters([grp], outcome, ["mixed"])[0])

    def attach(groups):  # on the verification thread: the pool's workers run the verifiers
        t0 = time.perf_counter()
        out = _attach(groups, reward, pool)
        timing["verify_busy"] += time.perf_counter() - t0
        return out

    def generate(prompt_ids):
        """One round: generate in `rollout_chunks` chunks; each chunk is verified in the background while the
        next is generated. time/verify counts only the wait after the last chunk (what generation did not hide)."""
        rows = [dict(by_id[p], prompt_id=p) for p in prompt_ids]
        size = -(-len(rows) // max(1, min(g.rollout_chunks, len(rows))))
        futures = []
        for i in range(0, len(rows), size):
            t0 = time.perf_counter()
            chunk = engine.generate(rows[i:i + size], g.group_size, sampling)
            timing["rollout"] += time.perf_counter() - t0
            futures.append(verifying.submit(attach, chunk))
        t1 = time.perf_counter()
        groups = [grp for f in futures for grp in f.result()]
        timing["verify"] += time.perf_counter() - t1
        if g.control == "shuffled_rewards":
            groups = _shuffle_verdicts(groups, control_rng)
        generated_all.extend(groups)
        return groups

    try:
        for step in range(start, g.steps + 1):
            timing = {"rollout": 0.0, "verify": 0.0, "verify_busy": 0.0, "update": 0.0}
            t_step = time.perf_counter()
            generated_all.clear()
            batch, refill = fill_batch(sampler.sample, generate, keep, prompts_here,
                                       g.max_refill_rounds if g.filter_mixed else 0)
            generated = ranks.gather(generated_all)  # every rank's verified groups (one process: its own)
            if ranks.main:
                ledger.update(generated, outcome, step, retire_after=g.retire_after or None)
                with open(archive_path, "a", encoding="utf-8") as af:
                    write_groups(af, generated, step)
            m = {"step": step, **group_stats(generated, outcome, reward=lambda s: reward.combine(s.verdicts)),
                 **refill.metrics()}
            scores = [reward.combine(s.verdicts) for grp in generated for s in grp.samples]
            scored = [x for x in scores if x is not None]
            m["reward/mean"] = sum(scored) / len(scored) if scored else 0.0
            m["reward/std"] = (sum((x - m["reward/mean"]) ** 2 for x in scored) / len(scored)) ** 0.5 if scored else 0.0
            m["verify/masked"] = len(scores) - len(scored)
            if outcome == "code":  # what the sandbox did this step (runs that hit a limit were killed whole)
                vs = [s.verdicts["code"] for grp in generated for s in grp.samples]
                fresh = []  # verdicts computed this step: not cache hits, not repeats of a program in the batch
                for v in vs:
                    if id(v) not in counted:
                        counted[id(v)] = v
                        fresh.append(v.metrics)
                m["sandbox/programs"] = len(fresh)
                m["sandbox/wall_s"] = sum(v.get("sandbox_wall_s", 0.0) for v in fresh)
                m["sandbox/runs"] = sum(v.get("sandbox_runs", 0) for v in fresh)
                m["sandbox/leftover_processes"] = sum(v.get("leftover_processes", 0) for v in fresh)
            lengths = [len(s.token_ids) for grp in generated for s in grp.samples]
            m["completions/mean_length"] = sum(lengths) / max(1, len(lengths))
            m["throughput/tokens_per_s"] = sum(len(s.token_ids) for grp in generated_all for s in grp.samples) \
                / max(1e-9, timing["rollout"])  # generated by this rank, over its generation time
            m["completions/clipped_ratio"] = sum(s.truncated for grp in generated for s in grp.samples) / max(1, len(lengths))
            t0 = time.perf_counter()
            tensors = tensors_from_groups(batch, reward, tok, g) if batch else None
            n = tensors[0].shape[0] if tensors is not None else 0
            n_mb = ranks.max(-(-n // g.minibatch_size))  # the same number of optimiser steps on every rank
            if n_mb:
                if tensors is not None and (step % g.eval_every == 1 or g.eval_every == 1):
                    m.update(logprob_mismatch(model, tok, batch[:8], temperature=g.temperature or 1.0))
                model.train()
                stats: dict[str, list[float]] = {}
                for _ in range(g.num_iterations):
                    order = list(range(n))
                    rng.shuffle(order)
                    for j in range(n_mb):
                        idx = torch.tensor(order[j * g.minibatch_size:(j + 1) * g.minibatch_size], dtype=torch.long)
                        opt.zero_grad(set_to_none=True)
                        if len(idx) == 0:  # this rank has fewer samples than another: a zero loss through DDP
                            train_model(input_ids=torch.tensor([[tok.bos_token_id]])).logits.sum().mul(0.0).backward()
                            metrics = {}
                        else:
                            metrics = update_minibatch(train_model, ref, ranks, g, agg, tensors, idx)
                        if g.grad_clip > 0:
                            stats.setdefault("grad_norm", []).append(
                                float(torch.nn.utils.clip_grad_norm_(model.parameters(), g.grad_clip)))
                        opt.step()
                        for k, v in metrics.items():
                            stats.setdefault(k, []).append(v)
                sched.step()
                model.eval()
                if g.engine != "hf" and step % g.push_every == 0:
                    t_push = time.perf_counter()
                    engine.update_weights(model)
                    m["time/push"] = time.perf_counter() - t_push
                m.update({k: sum(v) / len(v) for k, v in stats.items()})
                m["train/samples"] = n
            timing["update"] = time.perf_counter() - t0
            m.update({f"time/{k}": v for k, v in timing.items()})
            m["time/step"] = time.perf_counter() - t_step  # everything but the held-out evaluation
            # updates the sampling weights lagged behind the trained ones this round (0 = on-policy)
            m["rollout/staleness"] = 0 if g.engine == "hf" else (step - 1) % g.push_every
            m["curriculum/retired"] = ledger.retired_count()
            if (step % g.eval_every == 0 or step == g.steps) and ranks.main:
                m["eval/accuracy"] = task_accuracy(model, tok, evals, pool, g.max_tokens)
            history.append(m)
            writer.write(m)
            if on_step:
                on_step(m)
            log(f"step {step}/{g.steps}  reward {m['reward/mean']:.3f}  mixed {m.get('groups/pct_mixed', 0):.2f}  "
                f"yield {m['curriculum/yield']:.2f}  loss {m.get('loss/policy', float('nan')):+.4f}  "
                f"clip {m.get('clip_ratio/region', 0):.3f}  rollout {timing['rollout']:.2f}s "
                f"verify {timing['verify']:.2f}s (busy {timing['verify_busy']:.2f}s) update {timing['update']:.2f}s"
                + (f" (sandbox {m['sandbox/wall_s']:.2f}s in {m['sandbox/runs']} runs, {m['sandbox/programs']} new programs)"
                   if outcome == "code" else "")
                + (f"  held-out {m['eval/accuracy']:.3f}" if "eval/accuracy" in m else ""))
            if g.checkpoint_every and step % g.checkpoint_every == 0 and ranks.main:
                checkpoint.save(cfg.output_dir, step, model, opt, sched, rngs, ledger.conn, (metrics_path, archive_path))
    finally:
        verifying.shutdown(wait=True)
        pool.close()
        ledger.close()
        writer.close()
    if ranks.main:
        checkpoint.save_final(cfg.output_dir, model, tok)
    ranks.barrier()
    return history, model, tok
