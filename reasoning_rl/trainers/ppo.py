"""PPO with a critic and GAE (Schulman et al. 2017; Ziegler et al. 2019 for the RLHF form).

What is PPO's own (the loop, `loop.py`, samples, verifies, records, evaluates and checkpoints):
  - the batch: token rewards = the outcome score on each completion's last token; with `kl_in_reward`,
    r_t -= beta * (log pi_old - log pi_ref) on every token (else the KL estimator in the loss, never both);
    V_old from the critic, then GAE(gamma, lam): A_t and returns G_t = A_t + V_t (docs/algorithms.md §gae);
    A whitened over the batch's tokens (§gae); masked samples (TIMEOUT/ERROR/ABSTAIN) leave the batch;
  - multi-turn episodes (ppo.environment): rewards, KL, GAE, whitening and both losses on the model's tokens
    only; the critic reads the whole sequence, observations included, and GAE skips them (§gae);
  - the update: policy loss = PPO clip (- entropy_coef * entropy), critic loss = clipped value loss (§gae);
    each model its own optimiser and gradient clip (the loop's `Net`s); micro-batches, by count (micro_batch_size)
    or within a padded-token budget (micro_batch_tokens), each weighed by its share of the tokens, accumulate to one
    padded batch's gradient;
  - after the update: the adaptive KL controller (§kl).

The critic is a copy of the policy's transformer with a scalar head initialised at zero, so
V starts at 0 and learns the pass rate. Under FSDP2 it is sharded like the policy (its values taken on whole
weights, its update a collective in step with the policy's). TRL 1.16 ships no PPO trainer; this fills that gap.
Checkpoints hold the critic, its optimiser and scheduler and the KL controller beside the loop's
states. Not here: a reward model (rewards are verifiers').
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable

import torch

from ..algos.advantages import gae, whiten
from ..config.sections import Config
from ..models.logprobs import TokenBatch, pad_rollouts, token_logprobs
from ..models.lora import body_of
from ..algos.losses import adaptive_kl_coef, entropy_bonus, kl_in_reward, masked_mean, ppo_clip, value_loss
from ..models.load import autocast
from ..types import Group
from . import loop
from .algorithm import Learner, Net, adamw
from .distributed import zero_loss
from .grpo_batch import MicroBatch, cut, micro_batches, pass_metrics
from .offpolicy import correct_batch


class Critic(torch.nn.Module):
    """V(s_t) for each completion token: the value of the state before the token is produced. A copy of the
    policy's transformer body with a scalar head initialised at zero."""

    def __init__(self, policy, own: bool = False) -> None:
        """own: `policy` is a copy made for the critic (under FSDP2, `Ranks.whole_copy`), whose body it takes
        instead of copying it again."""
        super().__init__()
        body = body_of(policy)
        self.body = body if own else copy.deepcopy(body)  # (B, T, H) hidden states (with LoRA: the adapted body)
        w = next(policy.parameters())  # the head lives where the body does, in its dtype
        self.head = torch.nn.Linear(policy.config.hidden_size, 1, device=w.device, dtype=w.dtype)
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


@dataclass(frozen=True)
class PPOBatch:
    tokens: TokenBatch
    A: torch.Tensor  # (n, Tc) advantages
    returns: torch.Tensor  # (n, Tc) value targets
    values_old: torch.Tensor  # (n, Tc) the critic's values when the batch was made
    logp_ref: torch.Tensor | None  # (n, Tc) the reference policy's log-probs, or None
    is_weight: torch.Tensor | None = None  # (n, Tc) or (n, 1) rollout-correction weights (offpolicy.py), or None

    def __len__(self) -> int:
        return len(self.tokens)


class PPO:
    name = "ppo"

    def setup(self, learner: Learner) -> tuple[list[Net], dict]:
        rl = learner.rl
        # under FSDP2 the policy is sharded by now: the critic takes the body of every rank's whole copy of it
        whole = learner.ranks.whole_copy(learner.model)
        self.critic = Critic(whole, own=whole is not learner.model)
        self.critic_t = learner.ranks.wrap(self.critic)  # DDP under a launcher; FSDP2 shards it in place, so the
        opt_v, sched_v = adamw(self.critic, rl.critic_lr, rl.warmup_steps)  # optimiser comes after
        self.kl_ctl = AdaptiveKL(rl.beta, rl.kl_target, rl.kl_horizon)
        return [Net("critic", self.critic, self.critic_t, opt_v, sched_v, "grad_norm/critic")], {"kl": self.kl_ctl}

    def make_batch(self, learner: Learner, groups: list[Group]) -> tuple[PPOBatch | None, dict[str, float]]:
        """Scored samples -> token rewards, V_old, (reference log-probs), GAE advantages and returns."""
        p, tok, model, m = learner.rl, learner.tok, learner.model, {}
        kept = [(g.prompt, s, r) for g in groups for s in g.samples
                for r in [learner.reward.combine(s.verdicts)]
                if r is not None and s.token_ids and not (p.mask_truncated_completions and s.truncated)]
        batch = None
        if kept:
            b = pad_rollouts([tok(pr)["input_ids"] for pr, _, _ in kept], [list(s.token_ids) for _, s, _ in kept],
                             [list(s.logprobs) for _, s, _ in kept], tok.pad_token_id, device=model.device,
                             loss_masks=[s.loss_mask for _, s, _ in kept], floors=[s.floors for _, s, _ in kept])
            b, is_weight, corr = correct_batch(learner, b)  # engines that are not the trainer: its own pi_old
            m.update(corr)
            B, T = b.c_ids.shape
            dev = b.c_ids.device
            loss_mask = b.loss_mask  # (B, T) the model's tokens: c_mask less a multi-turn episode's observation tokens
            last = T - 1 - loss_mask.flip(1).long().argmax(1)  # (B,) each row's last model token
            R = torch.zeros(B, T, device=dev)
            R[torch.arange(B, device=dev), last] = torch.tensor([r for _, _, r in kept], device=dev)
            with torch.no_grad(), autocast(p.bf16, model):
                values_old = self.critic(b.p_ids, b.p_mask, b.c_ids, b.c_mask).float()  # (B, T)
                lref = token_logprobs(learner.ref, b.p_ids, b.p_mask, b.c_ids, b.c_mask, temperature=learner.temperature,
                                      share_prompts=learner.share_prompts) if learner.ref is not None else None
            if lref is not None:
                m["kl"] = masked_mean(b.logp_old - lref, loss_mask)  # k1 estimate of KL(pi_old || pi_ref) per token
                if p.kl_in_reward:
                    R = kl_in_reward(R, b.logp_old, lref, loss_mask, self.kl_ctl.coef)
            # GAE over the model's tokens: an observation is not a step (advantages.gae skips the holes)
            A, returns = gae(R, values_old, loss_mask, gamma=p.gamma, lam=p.lam)  # (B, T) each
            A = whiten(A, loss_mask) if p.whiten_advantages else A
            batch = PPOBatch(b, A, returns, values_old, lref, is_weight)
        if learner.ref is not None and learner.ranks.world > 1:  # one KL coefficient on every rank
            kls = [x for x in learner.ranks.gather([m.get("kl")]) if x is not None]
            if kls:
                m["kl"] = sum(kls) / len(kls)
        return batch, m

    def minibatch(self, learner: Learner, batch: PPOBatch, idx) -> dict[str, float]:
        """Policy and critic gradients of the rows `idx`, accumulated over its micro-batches (`_micro_batches`), each
        weighed by its share of the minibatch's tokens: every loss term is a token mean, so the sum is one padded
        batch's gradient. Metrics are token-weighted (ratio/max the max)."""
        ranks, stats = learner.ranks, {}
        runs = self._micro_batches(learner, batch, idx)
        for m in runs:
            skip = not m.last  # DDP all-reduces on a minibatch's last micro-batch only
            with ranks.no_sync(learner.policy.wrapped, skip), ranks.no_sync(self.critic_t, skip):
                metrics = self._micro(learner, batch, idx[m.sub], m)
            for key, val in metrics.items():
                stats[key] = max(stats.get(key, val), val) if key == "ratio/max" else stats.get(key, 0) + m.share * val
        return {**stats, **pass_metrics([m.padded for m in runs])}

    def _micro_batches(self, learner: Learner, batch: PPOBatch, idx) -> list[MicroBatch]:
        """The minibatch `idx` cut by size (ppo.micro_batch_tokens: rows in length order, each pass within the
        budget, logprobs.token_budget_runs) or by count (ppo.micro_batch_size rows at a time, in order)."""
        p, mb = learner.rl, batch.tokens[idx]
        if p.micro_batch_tokens:
            return micro_batches(mb, 1, learner.share_prompts, budget=p.micro_batch_tokens)
        size = p.micro_batch_size or len(mb)
        return cut(mb, [torch.arange(k, min(k + size, len(mb))) for k in range(0, len(mb), size)])

    def _micro(self, learner: Learner, batch: PPOBatch, rows, m: MicroBatch) -> dict[str, float]:
        """The losses of one micro-batch (`rows` of the batch, trimmed as `m`), backpropagated at its share."""
        p, tc = learner.rl, m.c_ids.shape[1]

        def own(t):  # (B, T) -> (n, tc): this micro-batch's rows and columns
            return t[rows][:, :tc]

        with autocast(p.bf16, learner.model):
            logp, ent = token_logprobs(learner.policy.wrapped, m.p_ids, m.p_mask, m.c_ids, m.c_mask,
                                       temperature=learner.temperature, return_entropy=True,
                                       share_prompts=learner.share_prompts, floor=m.floor)
            v = self.critic_t(m.p_ids, m.p_mask, m.c_ids, m.c_mask)
        logp, ent, v = logp.float(), ent.float(), v.float()
        in_loss = not p.kl_in_reward and batch.logp_ref is not None
        pol = ppo_clip(logp, own(batch.tokens.logp_old), own(batch.A), m.loss_mask, eps_low=p.eps_low,
                       eps_high=p.eps_high, agg="token_mean", logp_ref=own(batch.logp_ref) if in_loss else None,
                       beta=self.kl_ctl.coef if in_loss else 0.0, kl_estimator=p.kl_estimator,
                       is_weight=None if batch.is_weight is None else own(batch.is_weight))
        loss = pol.loss
        if p.entropy_coef > 0:
            loss = loss + p.entropy_coef * entropy_bonus(ent, m.loss_mask).loss
        vl = value_loss(v, own(batch.returns), m.loss_mask, values_old=own(batch.values_old),
                        clip_range=p.vf_clip or None)
        (loss * m.share).backward()
        (vl.loss * m.share).backward()
        return {**pol.metrics, **vl.metrics, "entropy": masked_mean(ent.detach(), m.loss_mask)}

    def passes(self, learner: Learner, batch: PPOBatch, idx) -> int:
        return len(self._micro_batches(learner, batch, idx))

    def touch(self, learner: Learner) -> None:
        zero_loss(learner.policy.wrapped, critic=self.critic_t)  # _micro's order

    def after_update(self, learner: Learner, metrics: dict[str, float]) -> dict[str, float]:
        if learner.rl.adaptive_kl and "kl" in metrics:
            return {"kl_coef": self.kl_ctl.update(metrics["kl"])}
        return {}


def train_ppo(cfg: Config, log: Callable[[str], None] = print,
              on_step: Callable[[dict], bool | None] | None = None,
              resume: bool = False, resume_changed: bool = False):
    """Run PPO as configured (section `ppo`). Returns (history, model, tokenizer).

    resume: continue from `output_dir/checkpoint` (the same trajectory as an uninterrupted run); resume_changed:
    accept config changes since the checkpoint that make the trajectory depart (refused otherwise)."""
    return loop.train(cfg, PPO(), log, on_step, resume, resume_changed)
