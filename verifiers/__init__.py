"""reasoning-rl verifiers: programmatic rewards that return typed `Verdict`s.

Part of the `reasoning-rl` distribution (not PrimeIntellect's `verifiers` package on
PyPI: do not install both in one environment). Never imports torch.
"""
from reasoning_rl.types import Status, Verdict

from .base import SpecError, Verifier, VerifierSpec, check_verdict, check_verifier
from .registry import ENTRY_POINT_GROUP, PluginError, distribution, get, load_all, names, plugin_errors, register

from .reward import Reward, Term, as_trl_reward
from .runtime import Call, VerifierPool, default_pool


def verify(name: str, completion, reference=None, **options) -> Verdict:
    """Run one registered verifier through the runtime (worker process, wall-clock limit, cache).

    `timeout=` (seconds) overrides the verifier's default budget. A verifier that hangs, crashes
    or overruns gives a TIMEOUT/ERROR verdict with score None: masked, never 0.
    """
    return default_pool().verify(name, completion, reference, **options)


def verify_batch(name: str, completions, references, **options) -> list[Verdict]:
    """`verify` for many completions at once, run concurrently on the default pool."""
    return default_pool().verify_batch(name, completions, references, **options)


__all__ = ["verify", "verify_batch", "VerifierPool", "Call", "default_pool", "Reward", "Term", "as_trl_reward", "Status", "Verdict", "Verifier", "VerifierSpec", "SpecError", "check_verifier", "check_verdict",
           "ENTRY_POINT_GROUP", "PluginError", "get", "names", "register", "load_all", "distribution",
           "plugin_errors"]
