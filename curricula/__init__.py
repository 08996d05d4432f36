"""reasoning-rl curricula: mixed-group filters, the pass-rate ledger and samplers.

Part of the `reasoning-rl` distribution (not the unrelated `curricula` package on PyPI).
Never imports torch.
"""
