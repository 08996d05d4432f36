"""reasoning-rl curricula: mixed-group filters, refill, the pass-rate ledger and samplers.

Part of the `reasoning-rl` distribution (not the unrelated `curricula` package on PyPI).
Never imports torch.
"""
from .filters import FILTERS, Decision, apply_filters, group_stats
from .ledger import Entry, Ledger, read_entries
from .refill import RefillStats, fill_batch
from .samplers import EasyFirstSampler, MixedBandSampler, UniformSampler, make_sampler
from .signal import p_mixed

__all__ = ["FILTERS", "Decision", "apply_filters", "group_stats", "Entry", "Ledger", "read_entries", "RefillStats",
           "fill_batch", "EasyFirstSampler", "MixedBandSampler", "UniformSampler", "make_sampler", "p_mixed"]
