"""Loaded at the start of each Python subprocess a test starts through `run_env` while REASONING_RL_TEST_AS is set
(as_machine.py), and each process the tests spawn (a generation worker): when that process runs
`python -m reasoning_rl` or loads the worker engine's module, the settings are applied before it runs. Any other
Python program (a sandboxed one, a verifier worker) starts as it would without it."""
import importlib.abc
import os
import sys


class _BeforeTheCommand(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in ("reasoning_rl.__main__", "reasoning_rl.rollout.worker"):  # a command; a generation worker
            sys.meta_path.remove(self)
            sys.path.insert(0, os.path.dirname(__file__))
            from as_machine import apply

            apply()
        return None


if os.environ.get("REASONING_RL_TEST_AS"):
    sys.meta_path.insert(0, _BeforeTheCommand())
