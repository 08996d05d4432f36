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

import copy
import os
import random
import time
from typing import Callable

from ..configs import Config
from . import checkpoint
from .distributed import NullWriter, Ranks
from .metrics import MetricsWriter


def outcome_verifier(cfg) -> str:
    return "code" if cfg.tasks.kind == "code" else "math"


def _attach(groups, reward, pool):
    """Every sample of every group gets its verdicts (one concurrent batch through the pool).
    Code tasks: the program is prompt (the signature) + completion (the body), checked against the row's tests."""
    from ..types import Group

    flat = [(g, s) for g in groups for s in g.samples]
    code = reward.outcome == "code"
    refs = [g.task.get("tests" if code else "answer") for g, _ in flat]
    texts = [(g.prompt + s.text) if code else s.text for g, s in flat]
    verdicts = reward.verify(texts, refs, [g.prompt for g, _ in flat], pool=pool)
    out, k = [], 0
    for g in groups:
        samples = []
        for s in g.samples:
            samples.append(s.with_verdicts(verdicts[k]))
            k += 1
        out.append(Group(g.prompt_id, g.prompt, g.task, samples))
    return out


def _tensors(groups, reward, tok, gcfg):
    """Flatten kept groups into padded tensors for the loss. Returns None when nothing is trainable."""
    import torch

    from ..advantages import ADVANTAGES
    from ..logprobs import pad_completions, pad_prompts

    scores = [[reward.combine(s.verdicts) for s in g.samples] for g in groups]
    R = torch.tensor([[0.0 if x is None else x for x in row] for row in scores], dtype=torch.float32)  # (B, G)
    valid = torch.tensor([[x is not None and len(s.token_ids) > 0 for x, s in zip(row, g.samples)]
                          for row, g in zip(scores, groups)])  # (B, G): masked samples are out of every statistic
    if gcfg.advantage == "process":
        valid &= torch.tensor([[not s.verdicts["prm"].masked for s in g.samples] for g in groups])
        A = _process_advantages(groups, valid, tok)  # (B, G, T): per token
    else:
        kw = {"scale": gcfg.scale_rewards} if gcfg.advantage == "grpo" else {}
        A = ADVANTAGES.get(gcfg.advantage)(R, valid, **kw)  # (B, G)
    rows = []
    for b, g in enumerate(groups):
        for i, s in enumerate(g.samples):
            if not valid[b, i] or (gcfg.mask_truncated_completions and s.truncated):
                continue
            a = A[b, i, :len(s.token_ids)].tolist() if A.dim() == 3 else A[b, i].item()
            rows.append((tok(g.prompt)["input_ids"], list(s.token_ids), list(s.logprobs), a))
    if not rows:
        return None
    p_ids, p_mask = pad_prompts([r[0] for r in rows], tok.pad_token_id)
    c_ids, c_mask = pad_completions([r[1] for r in rows], tok.pad_token_id)
    old = torch.zeros(c_ids.shape)
    for j, r in enumerate(rows):
        old[j, :len(r[2])] = torch.tensor(r[2])
    if A.dim() == 3:  # per-token advantages (process supervision), padded like the completions
        A_out = torch.zeros(c_ids.shape)
        for j, r in enumerate(rows):
            A_out[j, :len(r[3])] = torch.tensor(r[3])
    else:
        A_out = torch.tensor([r[3] for r in rows])
    return p_ids, p_mask, c_ids, c_mask, old, A_out


def _step_ends(tok, token_ids, text: str, separator: str = "\n\n") -> list[int]:
    """Index of the last token of each step of a completion (steps split at `separator`)."""
    ends, pos, t = [], 0, 0
    for step in text.split(separator):
        if not step.strip():
            pos += len(step) + len(separator)
            continue
        target = pos + len(step.rstrip())
        while t < len(token_ids) - 1 and len(tok.decode(list(token_ids[:t + 1]), skip_special_tokens=True)) < target:
            t += 1
        ends.append(t)
        pos += len(step) + len(separator)
    return ends or [max(0, len(token_ids) - 1)]


def _process_advantages(groups, valid, tok):
    """ALGORITHMS.md §7 from the `prm` verdicts' step scores: A (B, G, T)."""
    import torch

    from ..advantages import ADVANTAGES

    B, G = len(groups), max(len(g.samples) for g in groups)
    T = max(1, max(len(s.token_ids) for g in groups for s in g.samples))
    K = max(1, max(int(s.verdicts["prm"].metrics.get("steps", 0)) for g in groups for s in g.samples))
    r = torch.zeros(B, G, K)
    ends = torch.zeros(B, G, K, dtype=torch.long)
    m = torch.zeros(B, G, K, dtype=torch.bool)
    for b, g in enumerate(groups):
        for i, s in enumerate(g.samples):
            if not valid[b, i]:
                continue
            v = s.verdicts["prm"]
            n = int(v.metrics.get("steps", 0))
            e = _step_ends(tok, s.token_ids, s.text)
            for k in range(min(n, len(e))):
                r[b, i, k], ends[b, i, k], m[b, i, k] = v.metrics[f"step_{k}"], min(e[k], T - 1), True
    return ADVANTAGES.get("process")(r, ends, m, T)


def _update(train_model, ref, ranks, g, agg, tensors, idx) -> dict[str, float]:
    """Gradients of the clipped objective over the minibatch `idx`, accumulated over micro-batches of similar
    length (`grpo.length_buckets`), each padded only to its own longest row. Each micro-batch's loss is weighed by
    its share of the minibatch's tokens (token-mean losses) or sequences (per-sequence means), so the summed
    gradient equals that of one padded batch. Returns the minibatch's metrics (token-weighted; ratio/max the max)."""
    import torch

    from ..logprobs import length_buckets, token_logprobs, trim_padding
    from ..losses import ppo_clip
    from ..models import autocast

    p_ids, p_mask, c_ids, c_mask, old, A = (t[idx] for t in tensors)
    T = c_mask.sum()
    chunks = length_buckets((p_mask.sum(-1) + c_mask.sum(-1)).tolist(), g.length_buckets)
    metrics: dict[str, float] = {}
    for k, chunk in enumerate(chunks):
        sub = torch.tensor(chunk, dtype=torch.long)
        pi, pm, ci, cm = trim_padding(p_ids[sub], p_mask[sub], c_ids[sub], c_mask[sub])
        tc = ci.shape[1]
        A_sub = A[sub][:, :tc] if A.dim() == 2 else A[sub]
        share = float(cm.sum() / T)  # of the minibatch's tokens
        w = share if agg == "token_mean" else len(chunk) / len(idx)
        with ranks.no_sync(train_model, k < len(chunks) - 1):  # one all-reduce per minibatch, on its last chunk
            with autocast(g.bf16):
                logp = token_logprobs(train_model, pi, pm, ci, cm, temperature=g.temperature or 1.0)
                lref = None
                if ref is not None:
                    with torch.no_grad():
                        lref = token_logprobs(ref, pi, pm, ci, cm, temperature=g.temperature or 1.0)
            out = ppo_clip(logp, old[sub][:, :tc], A_sub, cm, eps_low=g.eps_low, eps_high=g.eps_high, agg=agg,
                           max_len=g.max_tokens, logp_ref=lref, beta=g.beta, kl_estimator=g.kl_estimator)
            (out.loss * w).backward()
        for name, v in out.metrics.items():
            if name == "ratio/max":
                metrics[name] = max(metrics.get(name, v), v)
            else:
                metrics[name] = metrics.get(name, 0.0) + (w if name == "loss/policy" else share) * v
    return metrics


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

        if not g.engine_url or not g.engine_model:
            raise ValueError(f"grpo.engine=openai needs grpo.engine_url and grpo.engine_model (got "
                             f"{g.engine_url!r}, {g.engine_model!r})")
        engine = OpenAIEngine(g.engine_url, g.engine_model, tokenizer=tok,
                              weights_dir=g.weights_dir or os.path.join(cfg.output_dir, "weights"))
        engine.update_weights(model)  # the server starts from the trainer's weights
    else:
        engine = HFEngine(model, tok)  # samples from the very object being trained: no push needed
    outcome = outcome_verifier(cfg)
    fmt = "repetition" if outcome == "code" else "think_answer"  # the format rule that fits the task kind
    terms = [verifiers.Term(outcome, 1.0), verifiers.Term(fmt, g.format_weight)]
    if g.advantage == "process" and not g.prm_model:
        raise ValueError("grpo.advantage=process needs grpo.prm_model (a PRM path; `reasoning-rl train prm` makes one)")
    if g.prm_model:
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

    def keep(grp) -> bool:  # DAPO dynamic sampling on the outcome's pass/fail
        return not g.filter_mixed or bool(apply_filters([grp], outcome, ["mixed"])[0])

    def generate(prompt_ids):
        t0 = time.perf_counter()
        groups = engine.generate([dict(by_id[p], prompt_id=p) for p in prompt_ids], g.group_size, sampling)
        t1 = time.perf_counter()
        groups = _attach(groups, reward, pool)
        timing["rollout"] += t1 - t0
        timing["verify"] += time.perf_counter() - t1
        generated_all.extend(groups)
        return groups

    try:
        for step in range(start, g.steps + 1):
            timing = {"rollout": 0.0, "verify": 0.0, "update": 0.0}
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
                vs = [s.verdicts["code"].metrics for grp in generated for s in grp.samples]
                m["sandbox/wall_s"] = sum(v.get("sandbox_wall_s", 0.0) for v in vs)
                m["sandbox/runs"] = sum(v.get("sandbox_runs", 0) for v in vs)
                m["sandbox/leftover_processes"] = sum(v.get("leftover_processes", 0) for v in vs)
            lengths = [len(s.token_ids) for grp in generated for s in grp.samples]
            m["completions/mean_length"] = sum(lengths) / max(1, len(lengths))
            m["completions/clipped_ratio"] = sum(s.truncated for grp in generated for s in grp.samples) / max(1, len(lengths))
            t0 = time.perf_counter()
            tensors = _tensors(batch, reward, tok, g) if batch else None
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
                            metrics = _update(train_model, ref, ranks, g, agg, tensors, idx)
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
                f"verify {timing['verify']:.2f}s update {timing['update']:.2f}s"
                + (f" (sandbox {m['sandbox/wall_s']:.2f}s in {m['sandbox/runs']} runs)" if outcome == "code" else "")
                + (f"  held-out {m['eval/accuracy']:.3f}" if "eval/accuracy" in m else ""))
            if g.checkpoint_every and step % g.checkpoint_every == 0 and ranks.main:
                checkpoint.save(cfg.output_dir, step, model, opt, sched, rngs, ledger.conn, (metrics_path, archive_path))
    finally:
        pool.close()
        ledger.close()
        writer.close()
    if ranks.main:
        checkpoint.save_final(cfg.output_dir, model, tok)
    ranks.barrier()
    return history, model, tok
