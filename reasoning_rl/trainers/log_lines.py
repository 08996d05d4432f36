"""The training log's words: one line a round, and the warning at the end of a run that trained (almost) nothing.

    log_line(metrics, steps) -> "step 3/60  reward 0.476  mixed 0.89 ... "   (+ "NO UPDATE: ..." and why)
    warn_if_idle(history, log)                                               one WARNING line, when due
    Slowdown().check(metrics, log)                                           once: rounds several-fold slower
                                                                             than the first ones on a busy machine

Not here: the metrics themselves (rounds.py, the algorithms), where they are written (metrics.py).
"""
from __future__ import annotations

from typing import Callable

from ..models.device import machine_load

_LOG = (("reward", "reward/mean", "{:.3f}"), ("mixed", "groups/pct_mixed", "{:.2f}"),
        ("yield", "curriculum/yield", "{:.2f}"), ("cut", "completions/clipped_ratio", "{:.2f}"),
        ("rev-kl", "distill/reverse_kl", "{:.3f}"), ("loss", "loss/policy", "{:+.4f}"), ("value", "loss/value", "{:.4f}"),
        ("kl", "kl", "{:.4f}"), ("clip", "clip_ratio/region", "{:.3f}"), ("rollout", "time/rollout", "{:.2f}s"),
        ("verify", "time/verify", "{:.2f}s"), ("update", "time/update", "{:.2f}s"),
        ("sandbox", "sandbox/wall_s", "{:.2f}s"), ("held-out", "eval/accuracy", "{:.3f}"),
        ("held-out cut", "eval/truncated", "{:.2f}"))


def log_line(m: dict, steps: int) -> str:
    """One line a step: the metrics of `_LOG` that the step has, and why a round trained nothing."""
    line = f"step {m['step']}/{steps}  " + "  ".join(f"{name} {fmt.format(m[k])}" for name, k, fmt in _LOG if k in m)
    return line + (f"  NO UPDATE: no trainable group ({_why_no_update(m)})" if m.get("train/samples") == 0 else "")


_NO_UPDATE = (("groups/pct_all_fail", "every sample failed", "easier data, a larger group, longer completions or a "
                                                              "warm start"),
              ("groups/pct_all_pass", "every sample passed", "harder data, or retire solved prompts"),
              ("groups/pct_unscored", "every sample was masked", "the verifier's masked statuses in the archive"),
              ("completions/clipped_ratio", "completions cut at max_tokens", "a larger generation.max_tokens"))


def _why_no_update(m: dict) -> str:
    """The shares of a round's groups that could not train, largest first, e.g. 'all failed in 1.00 of groups'."""
    parts = [f"{what}: {m[k]:.2f} of {'samples' if k.startswith('completions') else 'groups'}"
             for k, what, _ in _NO_UPDATE if m.get(k)]
    return "; ".join(parts) or "no group kept"


class Slowdown:
    """Says once when a round takes `factor` times the median of the run's first `first` rounds while the machine's
    load is above its cores: another job shares them (two processes on every core each ran 10-15x slower here)."""

    def __init__(self, first: int = 3, factor: float = 3.0) -> None:
        self.first, self.factor, self.times, self.said = first, factor, [], False

    def check(self, m: dict, log: Callable[[str], None], load: Callable[[], float] | None = None) -> bool:
        """Record this round's time/step; True (and one log line) the first time the slowdown is seen."""
        import statistics

        t = m.get("time/step")
        if t is None or self.said:
            return False
        if len(self.times) < self.first:
            self.times.append(t)
            return False
        base = statistics.median(self.times)
        busy, cores = machine_load(load)
        if t > self.factor * base and busy > cores:
            self.said = True
            log(f"NOTE step {m['step']}: a round took {t / base:.1f}x the first rounds' median ({t:.1f} s against "
                f"{base:.1f} s); the machine's load average is {busy:.1f} on {cores} cores, so other processes share "
                "them (num_threads=0 divides the cores among this project's processes only)")
        return self.said


def warn_if_idle(history: list[dict], log: Callable[[str], None]) -> None:
    """At the end of a run: say so when at least half its rounds trained nothing, with the likeliest cause."""
    idle = [m for m in history if m.get("train/samples") == 0]
    if not history or len(idle) < len(history) / 2:
        return
    key, what, fix = max(_NO_UPDATE, key=lambda c: sum(m.get(c[0], 0.0) for m in idle))
    log(f"WARNING: {len(idle)} of {len(history)} rounds trained nothing; mostly because {what} "
        f"(mean {sum(m.get(key, 0.0) for m in idle) / len(idle):.2f} in those rounds). Try {fix}.")
