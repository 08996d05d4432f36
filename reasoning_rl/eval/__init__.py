"""Evaluation: the one place held-out scores are computed.

    metrics.py   pass@k (unbiased), maj@k, avg@n with standard errors over verified groups
    sampled.py   `reasoning-rl eval`'s work: sample a task's rows, verify, score

Correctness is decided by the task's outcome verifier (Task.verify), the same check the reward makes.
"""
