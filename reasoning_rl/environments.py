"""The names an environment's author imports: `from reasoning_rl.environments import ENVIRONMENTS, Environment, Step`.

A plugin-facing name kept where docs/tools.md has always put it; the code lives in reasoning_rl/rollout/environments.py.
"""
from .rollout.environments import ENVIRONMENTS, Environment, Step

__all__ = ["ENVIRONMENTS", "Environment", "Step"]
