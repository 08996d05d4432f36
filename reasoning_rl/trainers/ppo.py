"""PPO with a critic and GAE (Schulman et al. 2017; Ziegler et al. 2019 for the RLHF form).

One round (a "step"):
  1. B prompts, `samples_per_prompt` completions each from pi_old (the current weights);
  2. the verifier pool scores them; masked samples (TIMEOUT/ERROR/ABSTAIN) leave the batch;
  3. token rewards: the outcome score on each completion's last token; with `kl_in_reward`,
     r_t -= kl_coef * (log pi_old - log pi_ref) on every token (else k3 KL in the loss, never both);
  4. V_old from the critic, then GAE(gamma, lam): A_t and returns G_t = A_t + V_t (docs/algorithms.md §gae);
     A whitened over the batch's tokens;
  5. `num_epochs` epochs of minibatches: policy loss = PPO clip (- ent_coef * entropy), critic loss =
     clipped value loss; each model its own optimiser and gradient clip; micro-batches accumulate;
  6. metrics (JSONL, TensorBoard), held-out accuracy every `eval_every`, adaptive KL update.

The critic is a copy of the policy's transformer with a scalar head initialised at zero, so
V starts at 0 and learns the pass rate. TRL 1.16 ships no PPO trainer; this fills that gap.
Checkpoints (`checkpoint_every`) hold policy, critic, both optimisers and schedulers, the KL
controller, the RNGs and the ledger: a killed run continues the same trajectory with `resume=True`.
Not here: a reward model (rewards are verifiers'), resuming a multi-process run.
"""
from __future__ import annotations

import copy
import dataclasses
import os
import random
import time
from typing import Callable

from ..configs import Config
from ..advantages import whiten
from ..losses import adaptive_kl_coef
from ..run_dir import new_run_dir


def _critic(policy):
    import torch

    class Critic(torch.nn.Module):
        """V(s_t) for each completion token: the value of the state before the token is produced."""

        def __init__(self) -> None:
            super().__init__()
            self.body = copy.deepcopy(policy.model)  # (B, T, H) hidden states
            self.head = torch.nn.Linear(policy.config.hidden_size, 1)
            torch.nn.init.zeros_(self.head.weight)
            torch.nn.init.zeros_(self.head.bias)

        def forward(self, p_ids, p_mask, c_ids, c_mask):
            ids = torch.cat([p_ids, c_ids], dim=1)
            mask = torch.cat([p_mask, c_mask], dim=1)
            pos = (mask.long().cumsum(-1) - 1).clamp(min=0)
            h = self.body(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False).last_hidden_state
            Tc = c_ids.shape[1]
            v = self.head(h[:, -Tc - 1:-1, :]).squeeze(-1).float()  # (B, Tc): state before token t
            return v * c_mask.to(v.dtype)

    return Critic()


class AdaptiveKL:
    """The KL coefficient under `losses.adaptive_kl_coef` (docs/algorithms.md §kl), kept across rounds."""

    def __init__(self, coef: float, target: float, horizon: int) -> None:
        self.coef, self.target, self.horizon = coef, target, horizon

    def update(self, kl: float, n_steps: int = 1) -> float:
        self.coef = adaptive_kl_coef(self.coef, kl, self.target, self.horizon, n_steps)
        return self.coef

    def state_dict(self) -> dict:
        return {"coef": self.coef}

    def load_state_dict(self, state: dict) -> None:
        self.coef = float(state["coef"])


def train_ppo(cfg: Config, log: Callable[[str], None] = print, on_step: Callable[[dict], None] | None = None,
              resume: bool = False):
    """Run PPO as configured. Returns (history, model, tokenizer).

    resume: continue from `output_dir/checkpoint` (the same trajectory as an uninterrupted run)."""
    import torch

    import verifiers
    from curricula import Ledger

    from ..advantages import gae
    from ..archive import write_groups
    from ..evaluate import greedy_accuracy
    from ..logprobs import pad_completions, pad_prompts, token_logprobs
    from ..losses import entropy_bonus, kl_in_reward, masked_mean, ppo_clip, value_loss
    from ..models import autocast as autocast_to
    from ..models import load_policy
    from ..rollout import HFEngine, SamplingConfig
    from ..sft import seed_everything
    from ..tiny.tasks import make_rows
    from . import checkpoint
    from .distributed import NullWriter, Ranks
    from .grpo import _attach
    from .metrics import MetricsWriter

    p = cfg.ppo
    torch.set_num_threads(cfg.num_threads)
    ranks = Ranks()  # under `accelerate launch`: this rank's share of the prompts; rank 0 writes
    if ranks.world > 1 and resume:
        raise ValueError("train ppo --resume: resuming a multi-process run is not supported yet; resume it with one "
                         "process")
    prompts_here = ranks.share(p.prompts_per_step, "ppo.prompts_per_step")
    log = ranks.logger(log)
    seed_everything(cfg.seed + ranks.rank)
    if not cfg.output_dir:  # called from Python with the default: a new run directory, as the CLI gives
        cfg = dataclasses.replace(cfg, output_dir=new_run_dir("ppo"))
        log(f"run directory: {cfg.output_dir}")
    os.makedirs(cfg.output_dir, exist_ok=True)
    model, tok = ranks.main_first(load_policy, cfg, log=log)
    critic = _critic(model)
    ref = copy.deepcopy(model).eval() if p.kl_coef > 0 else None
    train_rows, test_rows = make_rows(cfg.tasks)
    train_rows = train_rows[:p.train_prompts] if p.train_prompts else train_rows
    engine = HFEngine(model, tok)
    reward = verifiers.Reward((verifiers.Term("math", 1.0),), outcome="math")
    pool = verifiers.VerifierPool(num_workers=p.verifier_workers)
    ledger_path = os.path.join(cfg.output_dir, "ledger.sqlite")
    if resume:
        checkpoint.restore_ledger(cfg.output_dir, ledger_path)
    ledger = Ledger(ledger_path) if ranks.main else None
    sampling = SamplingConfig(temperature=p.temperature, max_tokens=p.max_tokens)
    warm = lambda s: min(1.0, (s + 1) / max(1, p.warmup_steps))  # noqa: E731
    opt = torch.optim.AdamW(model.parameters(), lr=p.lr, betas=(0.9, 0.99), weight_decay=0.0)
    opt_v = torch.optim.AdamW(critic.parameters(), lr=p.critic_lr, betas=(0.9, 0.99), weight_decay=0.0)
    scheds = [torch.optim.lr_scheduler.LambdaLR(o, warm) for o in (opt, opt_v)]
    policy_t, critic_t = ranks.wrap(model), ranks.wrap(critic)  # DDP under a launcher
    kl_ctl = AdaptiveKL(p.kl_coef, p.kl_target, p.kl_horizon)
    autocast = lambda: autocast_to(p.bf16, model)  # noqa: E731
    rng = random.Random(cfg.seed + ranks.rank)
    evals = test_rows[:p.eval_size]
    archive_path = os.path.join(cfg.output_dir, "archive.jsonl")
    metrics_path = os.path.join(cfg.output_dir, "metrics.jsonl")
    states = {"critic": critic, "opt_v": opt_v, "sched_v": scheds[1], "kl": kl_ctl}
    start = 1
    if resume:
        start = checkpoint.load(cfg.output_dir, model, opt, scheds[0], {"shuffle": rng}, (metrics_path, archive_path),
                                extra=states) + 1
        log(f"resumed from {os.path.join(cfg.output_dir, checkpoint.NAME)} at step {start - 1}")
    writer = MetricsWriter(cfg.output_dir, p.steps, append=resume, description="ppo") if ranks.main else NullWriter()
    if ranks.main and not resume:
        acc = greedy_accuracy(model, tok, evals)
        log(f"step 0: held-out accuracy {acc:.3f} ({len(evals)} prompts, greedy)")
        writer.write({"step": 0, "eval/accuracy": acc})
        open(archive_path, "w").close()
    history: list[dict] = []
    try:
        for step in range(start, p.steps + 1):
            t0 = time.perf_counter()
            prompts = rng.sample(train_rows, min(prompts_here, len(train_rows)))
            groups = engine.generate(prompts, p.samples_per_prompt, sampling)
            t1 = time.perf_counter()
            groups = _attach(groups, reward, pool)
            t2 = time.perf_counter()
            everyone = ranks.gather(groups)  # metrics, ledger and archive see every rank's samples
            if ranks.main:
                ledger.update(everyone, "math", step)
                with open(archive_path, "a", encoding="utf-8") as af:
                    write_groups(af, everyone, step)
            all_kept = [(s, r) for g in everyone for s in g.samples
                        for r in [reward.combine(s.verdicts)] if r is not None and s.token_ids]
            m = {"step": step, "verify/masked": sum(len(g.samples) for g in everyone) - len(all_kept)}
            m["reward/mean"] = sum(r for _, r in all_kept) / max(1, len(all_kept))
            m["reward/std"] = (sum((r - m["reward/mean"]) ** 2 for _, r in all_kept) / max(1, len(all_kept))) ** 0.5
            m["completions/mean_length"] = sum(len(s.token_ids) for s, _ in all_kept) / max(1, len(all_kept))
            m["completions/clipped_ratio"] = sum(s.truncated for s, _ in all_kept) / max(1, len(all_kept))
            rows = [(g.prompt, s, reward.combine(s.verdicts)) for g in groups for s in g.samples]
            kept = [(pr, s, r) for pr, s, r in rows if r is not None and s.token_ids]  # this rank's
            scores = [r for _, _, r in kept]
            n_mb = ranks.max(-(-len(kept) // p.minibatch_size))  # the same number of optimiser steps on every rank
            if n_mb:
                B = len(kept)
                lref = None
                if kept:
                    p_ids, p_mask = pad_prompts([tok(pr)["input_ids"] for pr, _, _ in kept], tok.pad_token_id)
                    c_ids, c_mask = pad_completions([list(s.token_ids) for _, s, _ in kept], tok.pad_token_id)
                    T = c_ids.shape[1]
                    old = torch.zeros(B, T)
                    for j, (_, s, _) in enumerate(kept):
                        old[j, :len(s.logprobs)] = torch.tensor(s.logprobs)
                    lengths = c_mask.sum(1).long()  # (B,)
                    R = torch.zeros(B, T)
                    R[torch.arange(B), lengths - 1] = torch.tensor(scores)  # outcome reward on the last token
                    with torch.no_grad(), autocast():
                        values_old = critic(p_ids, p_mask, c_ids, c_mask).float()  # (B, T)
                        lref = token_logprobs(ref, p_ids, p_mask, c_ids, c_mask, temperature=p.temperature or 1.0) \
                            if ref is not None else None
                    if lref is not None:
                        m["kl"] = masked_mean(old - lref, c_mask)  # k1 estimate of KL(pi_old || pi_ref) per token
                        if p.kl_in_reward:
                            R = kl_in_reward(R, old, lref, c_mask, kl_ctl.coef)
                    A, returns = gae(R, values_old, c_mask, gamma=p.gamma, lam=p.lam)  # (B, T) each
                    if p.whiten_advantages:  # over this rank's batch
                        A = whiten(A, c_mask)
                if ref is not None and ranks.world > 1:  # one KL coefficient on every rank
                    kls = [x for x in ranks.gather([m.get("kl")]) if x is not None]
                    if kls:
                        m["kl"] = sum(kls) / len(kls)
                stats: dict[str, list[float]] = {}
                model.train()
                critic.train()
                micro = p.micro_batch_size or p.minibatch_size
                for _ in range(p.num_epochs):
                    order = list(range(B))
                    rng.shuffle(order)
                    for i in range(n_mb):
                        mb = order[i * p.minibatch_size:(i + 1) * p.minibatch_size]
                        opt.zero_grad(set_to_none=True)
                        opt_v.zero_grad(set_to_none=True)
                        if not mb:  # this rank has fewer samples than another: zero losses through DDP
                            one = torch.tensor([[tok.bos_token_id]])
                            (policy_t(input_ids=one).logits.sum() * 0.0).backward()
                            (critic_t(one, torch.ones_like(one), one, torch.ones_like(one)).sum() * 0.0).backward()
                        for k in range(0, len(mb), micro):
                            idx = torch.tensor(mb[k:k + micro])
                            share = len(idx) / len(mb)  # accumulate: the micro-batch's share of the minibatch
                            last = k + micro >= len(mb)  # DDP all-reduces on a minibatch's last micro-batch only
                            with ranks.no_sync(policy_t, not last), ranks.no_sync(critic_t, not last):
                                with autocast():
                                    logp, ent = token_logprobs(policy_t, p_ids[idx], p_mask[idx], c_ids[idx],
                                                               c_mask[idx], temperature=p.temperature or 1.0,
                                                               return_entropy=True)
                                    v = critic_t(p_ids[idx], p_mask[idx], c_ids[idx], c_mask[idx])
                                logp, ent, v = logp.float(), ent.float(), v.float()
                                pol = ppo_clip(logp, old[idx], A[idx], c_mask[idx], eps_low=p.eps, agg="token_mean",
                                               logp_ref=None if p.kl_in_reward or lref is None else lref[idx],
                                               beta=0.0 if p.kl_in_reward else kl_ctl.coef, kl_estimator="k3")
                                loss = pol.loss
                                if p.ent_coef > 0:
                                    eb = entropy_bonus(ent, c_mask[idx])
                                    loss = loss + p.ent_coef * eb.loss
                                vl = value_loss(v, returns[idx], c_mask[idx], values_old=values_old[idx],
                                                clip_range=p.vf_clip or None)
                                (loss * share).backward()
                                (vl.loss * share).backward()
                            for key, val in {**pol.metrics, **vl.metrics,
                                             "entropy": masked_mean(ent.detach(), c_mask[idx])}.items():
                                stats.setdefault(key, []).append(val)
                        for net, o, name in ((model, opt, "grad_norm"), (critic, opt_v, "grad_norm/critic")):
                            if p.grad_clip > 0:
                                stats.setdefault(name, []).append(
                                    float(torch.nn.utils.clip_grad_norm_(net.parameters(), p.grad_clip)))
                            o.step()
                for s in scheds:
                    s.step()
                model.eval()
                critic.eval()
                m.update({k: sum(v) / len(v) for k, v in stats.items()})
                m["train/samples"] = B
                if p.adaptive_kl and "kl" in m:
                    m["kl_coef"] = kl_ctl.update(m["kl"])
            m.update({"time/rollout": t1 - t0, "time/verify": t2 - t1, "time/update": time.perf_counter() - t2})
            if (step % p.eval_every == 0 or step == p.steps) and ranks.main:
                m["eval/accuracy"] = greedy_accuracy(model, tok, evals)
            history.append(m)
            writer.write(m)
            if on_step:
                on_step(m)
            log(f"step {step}/{p.steps}  reward {m['reward/mean']:.3f}  loss {m.get('loss/policy', float('nan')):+.4f}  "
                f"value {m.get('loss/value', float('nan')):.4f}  kl {m.get('kl', 0):.4f}  "
                f"clip {m.get('clip_ratio/region', 0):.3f}  rollout {m['time/rollout']:.2f}s "
                f"update {m['time/update']:.2f}s" + (f"  held-out {m['eval/accuracy']:.3f}" if "eval/accuracy" in m else ""))
            if p.checkpoint_every and step % p.checkpoint_every == 0 and ranks.main:
                checkpoint.save(cfg.output_dir, step, model, opt, scheds[0], {"shuffle": rng}, ledger.conn,
                                (metrics_path, archive_path), extra=states)
    finally:
        pool.close()
        if ledger is not None:
            ledger.close()
        writer.close()
    if ranks.main:
        checkpoint.save_final(cfg.output_dir, model, tok)
    ranks.barrier()
    return history, model, tok
