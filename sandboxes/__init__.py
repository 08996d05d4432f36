"""reasoning-rl sandboxes: run untrusted programs against tests, contained.

Part of the `reasoning-rl` distribution (not the unrelated `sandboxes` package on PyPI).
Standard library only. The runner itself arrives with the Sandboxes issue.
"""
