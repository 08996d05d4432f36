"""reasoning-rl verifiers: programmatic rewards that return typed `Verdict`s.

Part of the `reasoning-rl` distribution (not PrimeIntellect's `verifiers` package on
PyPI: do not install both in one environment). Never imports torch.
"""
from reasoning_rl.types import Status, Verdict

from .base import SpecError, Verifier, VerifierSpec, check_verdict, check_verifier
from .registry import ENTRY_POINT_GROUP, PluginError, distribution, get, load_all, names, plugin_errors, register

__all__ = ["Status", "Verdict", "Verifier", "VerifierSpec", "SpecError", "check_verifier", "check_verdict",
           "ENTRY_POINT_GROUP", "PluginError", "get", "names", "register", "load_all", "distribution",
           "plugin_errors"]
