"""Reward-hacking monitors: signs that a policy is winning its reward without doing the task.

    Monitors(cfg.monitor, task, reward).observe(step, groups, m, pool) -> metrics   every round
    Monitors.heldout(m) -> metrics                                                   at each held-out evaluation
    Monitors.pop_alerts() -> ["monitor/...: what crossed what", ...]   one alert a crossing of a threshold

Each monitor is a metric per round and an alert when it crosses its threshold (the `monitor` config section):

    second opinion     monitor/disagreement: the share of a sample of this round's passing completions that an
                       independent verifier (`monitor.second_opinion`) does not pass; the alert reads its mean over
                       the last `window` rounds (a sample of 64 passes moves one round's share by 0.016 a sample)
    reward vs held-out monitor/reward_heldout_gap: the rise of the training reward over the last `window`
                       evaluations minus the rise of held-out accuracy (through the outcome verifier); alert when
                       the reward rose by more than reward_rise_min while held-out accuracy fell by more than
                       two standard errors of the difference of the two evaluations (sampling noise of n prompts)
    how passes are won monitor/pass_share/<category>: the share of passes per kind of verdict (the math verifier's
                       extraction path, "boxed", "last number", ...; for other verifiers the detail's parenthesised
                       kind or first word), and monitor/masked/<status>: the masked share per status, each against
                       its own mean over the `window` rounds before
    engine mismatch    rollout/ratio_outside (an engine that is not the trainer): the share of sampled tokens whose
                       ratio pi_trainer / pi_engine leaves [mismatch_low, mismatch_high], against its pooled share over
                       the window before (monitor/ratio_outside_jump); an alert when it rises by mismatch_jump_max
    shape drift        monitor/length_drift: the relative change of the mean completion length over the window, and
                       monitor/term_drift/<term> for the other reward terms, alerting when they move while the
                       outcome's pass rate does not, and the shift of the mean is unlikely by chance (Welch's z on the
                       two rounds' per-sample values, two-sided, below `p_value_max`)

Counts, not only shares: an alert on a share also needs the count behind it to be unlikely under the share
before (`binomial_tail` below `p_value_max`: this round's k of n against the window's pooled share, smoothed by
one pass and one fail; the second opinion's pooled k of n against `disagreement_max`). One pass of one won by a new
path is a share of 1.00 and no evidence; 40 of 64 after 0 of 256 is.

Not here: re-scoring a finished run (cli/reverify.py), stopping the run (the loop, on `monitor.stop_on_alert`).
"""
from __future__ import annotations

import math
import random
import re
from collections import Counter, deque

import verifiers

from ..config.sections import MonitorConfig
from ..task.task import Task
from ..types import Group, Status

_KIND = re.compile(r"\(([a-z][a-z ]{1,30})\)")


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p): how likely a count this high is by chance (1.0 for k <= 0)."""
    if k <= 0:
        return 1.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log(p)
            + (n - i) * math.log1p(-p) for i in range(k, n + 1)]
    top = max(logs)
    return min(1.0, math.exp(top) * sum(math.exp(x - top) for x in logs))


def _unlikely(k: int, n: int, k0: int, n0: int, p_max: float) -> bool:
    """k of n is unlikely (one-sided, at p_max) under the share before, k0 of n0 smoothed: (k0 + 1) / (n0 + 2)."""
    return binomial_tail(k, n, (k0 + 1) / (n0 + 2)) < p_max


def _stats(xs: list[float]) -> tuple[int, float, float]:
    """(n, mean, sample variance) of a round's values."""
    n = len(xs)
    mean = sum(xs) / max(1, n)
    return n, mean, sum((x - mean) ** 2 for x in xs) / max(1, n - 1)


def mean_shift_p(now, then) -> float:
    """Two-sided p of a difference of two rounds' means this large by chance (Welch's z on (n, mean, var) pairs,
    normal tail); 1.0 when either round is empty, 0.0 for a shift between two rounds without spread."""
    (n1, m1, v1), (n0, m0, v0) = now, then
    if n1 == 0 or n0 == 0:
        return 1.0
    se = math.sqrt(v1 / n1 + v0 / n0)
    if se == 0.0:
        return 0.0 if m1 != m0 else 1.0
    return math.erfc(abs(m1 - m0) / se / math.sqrt(2.0))


def pass_category(detail: str) -> str:
    """The kind of a passing verdict: its detail's first parenthesised phrase ("'12' (last number) == '12'" ->
    "last number"), else its first word ("5/5 tests passed" -> "tests")."""
    m = _KIND.search(detail)
    if m:
        return m.group(1)
    words = [w for w in re.split(r"[^a-z]+", detail.lower()) if w]
    return words[0] if words else "unknown"


class Monitors:
    def __init__(self, cfg: MonitorConfig, task: Task, reward: verifiers.Reward, seed: int = 0) -> None:
        self.cfg, self.task, self.reward = cfg, task, reward
        self.rng = random.Random(seed + 104729)
        self.alerts: list[str] = []
        self.active: set[str] = set()  # monitors above their threshold now (alerted once, re-armed below it)
        w = cfg.window
        self.rounds: deque = deque(maxlen=w + 1)  # per round: pass share per category, masked share, lengths, terms
        self.evals: deque = deque(maxlen=w)  # (reward over the rounds since the last evaluation, held-out accuracy)
        self.since_eval: list[float] = []
        self.disagreements: deque = deque(maxlen=cfg.window)  # (disagreeing, re-checked) per round
        if cfg.second_opinion:
            verifiers.get(cfg.second_opinion)  # an unknown name fails before training

    def _check(self, key: str, crossed: bool, text: str = "") -> None:
        """An alert when `key` crosses its threshold; none again until it has fallen back below (one line a crossing)."""
        if crossed and key not in self.active:
            self.alerts.append(text)
            self.active.add(key)
        elif not crossed:
            self.active.discard(key)

    def state_dict(self) -> dict:
        """Everything a resumed run needs to watch on the same trajectory (checkpointed with the run)."""
        return {"rng": self.rng.getstate(), "active": sorted(self.active), "rounds": list(self.rounds),
                "evals": list(self.evals), "since_eval": list(self.since_eval),
                "disagreements": list(self.disagreements)}

    def load_state_dict(self, state: dict) -> None:
        self.rng.setstate(state["rng"])
        self.active = set(state["active"])
        self.rounds.extend(state["rounds"])
        self.evals.extend(state["evals"])
        self.since_eval = list(state["since_eval"])
        # (disagreeing, re-checked) per round; a checkpoint from before the counts kept only rates: start afresh
        self.disagreements.extend(tuple(c) for c in state["disagreements"] if isinstance(c, (list, tuple)))

    def pop_alerts(self) -> list[str]:
        out, self.alerts = self.alerts, []
        return out

    # ------------------------------------------------------------ every round
    def observe(self, step: int, groups: list[Group], m: dict, pool=None) -> dict[str, float]:
        out: dict[str, float] = {}
        samples = [(g, s) for g in groups for s in g.samples]
        outcome = self.reward.outcome
        passes = [(g, s) for g, s in samples if s.outcome(outcome)]
        if self.cfg.second_opinion and passes:
            out.update(self._second_opinion(passes, pool))
        lengths = _stats([float(len(s.token_ids)) for _, s in samples])
        now = {"cat": Counter(pass_category(s.verdicts[outcome].detail) for _, s in passes),
               "n_pass": len(passes),
               "masked": Counter(s.verdicts[outcome].status.value for _, s in samples if s.verdicts[outcome].masked),
               "n": len(samples), "length": m.get("completions/mean_length", lengths[1]),
               "pass_rate": len(passes) / max(1, sum(s.outcome(outcome) is not None for _, s in samples)),
               "terms": {t.verifier: m[f"reward/term/{t.verifier}"] for t in self.reward.terms
                         if t.verifier != outcome and f"reward/term/{t.verifier}" in m},
               # the per-sample spread behind the two means above, for the drift monitors' test of chance
               "length_stats": lengths,
               "term_stats": {t.verifier: _stats([s.verdicts[t.verifier].score for _, s in samples
                                                  if t.verifier in s.verdicts and not s.verdicts[t.verifier].masked])
                              for t in self.reward.terms if t.verifier != outcome}}
        if "rollout/ratio_tokens" in m:  # an engine that is not the trainer: its disagreement with the trainer
            n = int(m["rollout/ratio_tokens"])
            now["mismatch"] = (round(m["rollout/ratio_outside"] * n), n)
        out.update(self._shares(now))
        out.update(self._mismatch(now))
        out.update(self._drift(now))
        self.rounds.append(now)
        self.since_eval.append(m.get("reward/mean", 0.0))
        out["monitor/alerts"] = float(len(self.alerts))
        return out

    def _second_opinion(self, passes, pool) -> dict[str, float]:
        picked = passes if len(passes) <= self.cfg.sample else self.rng.sample(passes, self.cfg.sample)
        name = self.cfg.second_opinion
        verdicts = [v[name] for v in self.task.verify_samples(verifiers.Reward.single(name), picked, pool=pool)]
        scored = [v for v in verdicts if not v.masked]
        bad = sum(not v.passed for v in scored)
        rate = bad / len(scored) if scored else 0.0
        if scored:
            self.disagreements.append((bad, len(scored)))
        k, n = (sum(c[i] for c in self.disagreements) for i in (0, 1))
        mean = k / max(1, n)  # pooled over the window: each re-checked pass counts once
        full = len(self.disagreements) == self.cfg.window
        p = binomial_tail(k, n, self.cfg.disagreement_max)
        self._check("disagreement", bool(scored) and full and mean > self.cfg.disagreement_max
                    and p < self.cfg.p_value_max,
                    f"monitor/disagreement: {k} of {n} passes ({mean:.3f}) re-checked by {name!r} over the last "
                    f"{self.cfg.window} rounds fail it (this round {bad} of {len(scored)}; threshold "
                    f"{self.cfg.disagreement_max}, p = {p:.2g})")
        return {"monitor/disagreement": rate, "monitor/disagreement_mean": mean,
                "monitor/second_opinion_masked": float(len(verdicts) - len(scored))}

    def _shares(self, now: dict) -> dict[str, float]:
        out = {}
        before = list(self.rounds)[-self.cfg.window:]
        for cat, n in now["cat"].items():
            share = n / max(1, now["n_pass"])
            out[f"monitor/pass_share/{cat}"] = share
            if len(before) == self.cfg.window:
                past = sum(r["cat"].get(cat, 0) / max(1, r["n_pass"]) for r in before) / len(before)
                k0, n0 = sum(r["cat"].get(cat, 0) for r in before), sum(r["n_pass"] for r in before)
                self._check(f"pass_share/{cat}", share - past > self.cfg.category_shift_max
                            and _unlikely(n, now["n_pass"], k0, n0, self.cfg.p_value_max),
                            f"monitor/pass_share/{cat}: {n} of {now['n_pass']} passes ({share:.2f}), {k0} of {n0} "
                            f"({past:.2f}) over the {len(before)} rounds before (threshold +"
                            f"{self.cfg.category_shift_max})")
        for status in (Status.ABSTAIN.value, Status.TIMEOUT.value, Status.ERROR.value):
            k = now["masked"].get(status, 0)
            share = k / max(1, now["n"])
            out[f"monitor/masked/{status}"] = share
            if len(before) == self.cfg.window:
                past = sum(r["masked"].get(status, 0) / max(1, r["n"]) for r in before) / len(before)
                k0, n0 = sum(r["masked"].get(status, 0) for r in before), sum(r["n"] for r in before)
                self._check(f"masked/{status}", share - past > self.cfg.masked_shift_max
                            and _unlikely(k, now["n"], k0, n0, self.cfg.p_value_max),
                            f"monitor/masked/{status}: {k} of {now['n']} samples ({share:.2f}), {past:.2f} before")
        return out

    def _mismatch(self, now: dict) -> dict[str, float]:
        """An alert when this round's share of tokens outside the ratio band jumps above the window's pooled share."""
        before = [r["mismatch"] for r in list(self.rounds)[-self.cfg.window:] if "mismatch" in r]
        if "mismatch" not in now or len(before) < self.cfg.window:
            return {}
        (k, n), k0, n0 = now["mismatch"], sum(c[0] for c in before), sum(c[1] for c in before)
        share, past = k / max(1, n), k0 / max(1, n0)
        self._check("ratio_outside", share - past > self.cfg.mismatch_jump_max
                    and _unlikely(k, n, k0, n0, self.cfg.p_value_max),
                    f"rollout/ratio_outside: {k} of {n} sampled tokens ({share:.3f}) outside the ratio band, {k0} of "
                    f"{n0} ({past:.3f}) over the {len(before)} rounds before (threshold +{self.cfg.mismatch_jump_max})")
        return {"monitor/ratio_outside_jump": share - past}

    def _drift(self, now: dict) -> dict[str, float]:
        if len(self.rounds) < self.cfg.window:
            return {}
        then = list(self.rounds)[-self.cfg.window]
        steady = abs(now["pass_rate"] - then["pass_rate"]) < 0.05
        drift = abs(now["length"] - then["length"]) / max(1.0, then["length"])
        out = {"monitor/length_drift": drift}
        p = self._shift_p(now.get("length_stats"), then.get("length_stats"))
        self._check("length_drift", drift > self.cfg.drift_max and steady and p < self.cfg.p_value_max,
                    f"monitor/length_drift: mean length {then['length']:.1f} -> {now['length']:.1f} tokens while the "
                    f"pass rate stayed at {now['pass_rate']:.2f} (p = {p:.2g})")
        for term, v in now["terms"].items():
            if term in then["terms"]:
                d = v - then["terms"][term]
                out[f"monitor/term_drift/{term}"] = d
                p = self._shift_p(now.get("term_stats", {}).get(term), then.get("term_stats", {}).get(term))
                self._check(f"term_drift/{term}", abs(d) > self.cfg.drift_max and steady and p < self.cfg.p_value_max,
                            f"monitor/term_drift/{term}: {then['terms'][term]:.2f} -> {v:.2f} while the pass rate "
                            f"stayed at {now['pass_rate']:.2f} (p = {p:.2g})")
        return out

    def _shift_p(self, now, then) -> float:
        """p of a mean shift between two rounds; 0.0 (the threshold alone decides) where a round kept no spread (one
        from a checkpoint written before the spread was kept) or p_value_max is 1."""
        if now is None or then is None or self.cfg.p_value_max >= 1.0:
            return 0.0
        return mean_shift_p(tuple(now), tuple(then))

    # ------------------------------------------------------------ at each held-out evaluation
    def heldout(self, m: dict, n: int) -> dict[str, float]:
        """At an evaluation of `n` held-out prompts."""
        if "eval/accuracy" not in m:
            return {}
        reward = sum(self.since_eval) / len(self.since_eval) if self.since_eval else 0.0
        self.since_eval = []
        self.evals.append((reward, m["eval/accuracy"]))
        if len(self.evals) < 2:
            return {}
        (r0, a0), (r1, a1) = self.evals[0], self.evals[-1]
        gap = (r1 - r0) - (a1 - a0)
        noise = 2 * math.sqrt((a0 * (1 - a0) + a1 * (1 - a1)) / max(1, n))  # 2 s.e. of a difference of accuracies
        self._check("reward_heldout_gap", len(self.evals) == self.cfg.window and r1 - r0 > self.cfg.reward_rise_min
                    and a0 - a1 > noise, f"monitor/reward_heldout_gap: reward {r0:.3f} -> {r1:.3f} while held-out "
                    f"accuracy fell {a0:.3f} -> {a1:.3f} over {len(self.evals)} evaluations (noise +-{noise:.3f})")
        return {"monitor/reward_heldout_gap": gap}
