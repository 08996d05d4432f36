"""Filters over verified groups (DAPO dynamic sampling and friends), and group statistics.

A filter looks at one `Group` and says keep or drop, with a reason. Filters read the
*binary outcome* of the outcome verifier (`Verdict.passed`), never a shaped or composite
score: a format bonus must not make an all-wrong group look mixed. Masked samples
(ABSTAIN / TIMEOUT / ERROR) count for nothing: they cannot make a group mixed, and
`min_scored` drops groups with too few scored samples. Filters drop whole groups, so a
batch keeps its (groups x samples) shape.

Standard library only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from reasoning_rl.registry import Registry
from reasoning_rl.types import Group

from .signal import p_mixed

__all__ = ["FILTERS", "Decision", "apply_filters", "group_stats", "p_mixed"]


@dataclass(frozen=True)
class Decision:
    keep: bool
    reason: str = ""


FILTERS: Registry[Callable[..., Decision]] = Registry("group filter")


def _outcomes(g: Group, outcome: str) -> list[bool]:
    return [o for o in g.outcomes(outcome) if o is not None]


@FILTERS.register("mixed")
def mixed(g: Group, outcome: str, **_) -> Decision:
    """Keep only groups with at least one pass and one fail among scored samples (`Group.is_mixed`)."""
    if g.is_mixed(outcome):
        return Decision(True)
    scored = _outcomes(g, outcome)
    return Decision(False, "no scored samples" if not scored else "all pass" if all(scored) else "all fail")


@FILTERS.register("min_scored")
def min_scored(g: Group, outcome: str, *, min_scored: int = 2, **_) -> Decision:
    """Drop groups with fewer than `min_scored` samples the outcome verifier could score."""
    n = len(_outcomes(g, outcome))
    return Decision(n >= min_scored, "" if n >= min_scored else f"{n} scored < {min_scored}")


@FILTERS.register("max_truncated")
def max_truncated(g: Group, outcome: str, *, max_truncated_frac: float = 0.5, **_) -> Decision:
    """Drop groups in which more than this share of samples hit the length limit."""
    if not g.samples:
        return Decision(False, "empty group")
    frac = sum(s.truncated for s in g.samples) / len(g.samples)
    ok = frac <= max_truncated_frac
    return Decision(ok, "" if ok else f"{frac:.0%} truncated")


@FILTERS.register("max_length")
def max_length(g: Group, outcome: str, *, max_mean_tokens: float = 1e9, **_) -> Decision:
    """Drop groups whose mean completion length (tokens, or characters when no tokens) exceeds a bound."""
    if not g.samples:
        return Decision(False, "empty group")
    mean = sum(len(s.token_ids) or len(s.text) for s in g.samples) / len(g.samples)
    ok = mean <= max_mean_tokens
    return Decision(ok, "" if ok else f"mean length {mean:.0f} > {max_mean_tokens:g}")


def apply_filters(groups: Sequence[Group], outcome: str, names: Sequence[str] = ("mixed",),
                  **options) -> tuple[list[Group], dict[str, int]]:
    """Groups that pass every named filter, and a count of drop reasons."""
    fns = [(n, FILTERS.get(n)) for n in names]
    kept, reasons = [], {}
    for g in groups:
        for n, fn in fns:
            d = fn(g, outcome, **options)
            if not d.keep:
                key = f"{n}: {d.reason}"
                reasons[key] = reasons.get(key, 0) + 1
                break
        else:
            kept.append(g)
    return kept, reasons


def group_stats(groups: Sequence[Group], outcome: str, reward: Callable | None = None) -> dict[str, float]:
    """groups/pct_mixed|pct_all_pass|pct_all_fail|pct_unscored, and frac_reward_zero_std.

    frac_reward_zero_std: share of groups whose (composite, if `reward` maps a Sample to a float or None)
    rewards over scored samples have zero spread; without `reward`, the outcome's 0/1 is used.
    """
    n = len(groups)
    if n == 0:
        return {}
    mixed_n = all_pass = all_fail = unscored = zero_std = 0
    for g in groups:
        scored = _outcomes(g, outcome)
        if not scored:
            unscored += 1
        elif all(scored):
            all_pass += 1
        elif not any(scored):
            all_fail += 1
        else:
            mixed_n += 1
        if reward is None:
            values = [float(o) for o in scored]
        else:
            values = [v for v in (reward(s) for s in g.samples) if v is not None]
        if len(values) < 2 or max(values) == min(values):
            zero_std += 1
    return {"groups/pct_mixed": mixed_n / n, "groups/pct_all_pass": all_pass / n, "groups/pct_all_fail": all_fail / n,
            "groups/pct_unscored": unscored / n, "frac_reward_zero_std": zero_std / n}
