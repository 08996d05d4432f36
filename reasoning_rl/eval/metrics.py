"""Sampled-evaluation metrics: unbiased pass@k, maj@k and avg@n over verified groups, with standard errors.

Correctness is never decided here: the verdicts come from the task's outcome verifier (Task.verify), the same
check the reward makes. Not here: greedy held-out scores (held_out.py), the sampling itself (sampled.py).
"""
from __future__ import annotations


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c passed (Chen et al. 2021): 1 - C(n-c, k) / C(n, k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k: need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    prob_all_fail = 1.0
    for i in range(n - c + 1, n + 1):  # prod_{i} (1 - k / i), numerically stable
        prob_all_fail *= 1.0 - k / i
    return 1.0 - prob_all_fail


def majority_correct(answers: list[str | None], passed: list[bool | None]) -> bool:
    """maj@k: is the most common extracted answer (ties: the first to reach the top count) a passing one?"""
    counts: dict[str, int] = {}
    for a in answers:
        if a is not None:
            counts[a] = counts.get(a, 0) + 1
    if not counts:
        return False
    top = max(counts.values())
    winner = next(a for a in answers if a is not None and counts[a] == top)
    return any(p for a, p in zip(answers, passed) if a == winner)


def scored_outcome(s, outcome: str, truncated: str = "fail") -> bool | None:
    """A sample's pass/fail in an evaluation: the outcome verifier's (None when masked), except that with
    truncated="fail" (eval.truncated) a completion cut at max_tokens is a fail whatever it had written."""
    o = s.outcome(outcome)
    return False if o is not None and truncated == "fail" and s.truncated else o


def evaluate_sampled(groups, outcome: str, ks: tuple[int, ...], answer_key=lambda text: text.strip(),
                     truncated: str = "fail") -> dict[str, float]:
    """avg@n, pass@k (unbiased), maj@k and the truncated share over verified groups, each a mean over prompts with
    its standard error (key + "_se"); masked samples are left out. avg@n is the mean accuracy over a prompt's
    samples (pass@1 is the same number, kept under both names). maj@k votes on `answer_key(text)` (the task's: a
    math verifier's extracted answer, else the text itself). A truncated sample fails unless truncated="score"."""
    per: dict[str, list[float]] = {}
    n_max = max((len(g.samples) for g in groups), default=0)
    for g in groups:
        scored = [(s, o) for s in g.samples if (o := scored_outcome(s, outcome, truncated)) is not None]
        per.setdefault("truncated", []).extend(float(s.finish_reason == "length") for s in g.samples)
        n, c = len(scored), sum(o for _, o in scored)
        if n == 0:
            continue
        per.setdefault(f"avg@{n_max}", []).append(c / n)
        for k in sorted(set(ks) | {1}):  # pass@1 = c / n, always reported
            if k <= n:
                per.setdefault(f"pass@{k}", []).append(pass_at_k(n, c, k))
                head = scored[:k]
                per.setdefault(f"maj@{k}", []).append(float(majority_correct(
                    [answer_key(s.text) for s, _ in head], [o for _, o in head])))
    out: dict[str, float] = {}
    for key, xs in per.items():
        out[key], out[key + "_se"] = mean_se(xs)
    return out


def mean_se(xs: list[float]) -> tuple[float, float]:
    """The mean and its standard error, sqrt(var / n) with the unbiased variance (0 for fewer than two values)."""
    n = len(xs)
    m = sum(xs) / n
    var = sum((x - m) ** 2 for x in xs) / (n - 1) if n > 1 else 0.0
    return m, (var / n) ** 0.5


def format_split(samples, outcome: str, truncated: str = "fail") -> dict[str, float]:
    """Format and correctness of completions, each with its standard error: `parseable` (the outcome verifier read
    an answer: CORRECT or INCORRECT, not UNPARSEABLE; masked samples left out of every share), `cut` (stopped at
    max_tokens), `accuracy_parseable` (passes among the parseable ones; a cut one fails with truncated="fail")."""
    from ..types import Status

    scored = [s for s in samples if s.verdicts.get(outcome) is not None and not s.verdicts[outcome].masked]
    parsed = [s for s in scored if s.verdicts[outcome].status in (Status.CORRECT, Status.INCORRECT)]
    out: dict[str, float] = {}
    for key, xs in (("parseable", [float(s.verdicts[outcome].status is not Status.UNPARSEABLE) for s in scored]),
                    ("cut", [float(s.truncated) for s in scored]),
                    ("accuracy_parseable", [float(bool(scored_outcome(s, outcome, truncated))) for s in parsed])):
        if xs:
            out[key], out[key + "_se"] = mean_se(xs)
    return out
