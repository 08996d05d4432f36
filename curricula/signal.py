"""How much GRPO signal a prompt can give (docs/algorithms.md §curriculum).

With binary outcomes and success rate p, a group of G i.i.d. samples is mixed (carries a
signal) with probability P(mixed) = 1 - p^G - (1 - p)^G. The curriculum sampler weights
prompts by it. Standard library only.
"""
from __future__ import annotations


def p_mixed(p: float, G: int) -> float:
    """Probability that G Bernoulli(p) outcomes contain at least one pass and one fail."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p_mixed: p must lie in [0, 1], got {p!r}")
    if G < 1:
        raise ValueError(f"p_mixed: G must be >= 1, got {G!r}")
    return 1.0 - p**G - (1.0 - p) ** G
