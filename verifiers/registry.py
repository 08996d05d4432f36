"""The verifier registry: built-ins plus plugins found through the entry-point group
`reasoning_rl.verifiers`.

An entry point may name a `Verifier` subclass (instantiated with no arguments), an
instance, or a zero-argument factory. Each plugin is imported and validated on its own:
a plugin that fails to import, declares a bad spec, or reuses a taken name is recorded
as a `PluginError` (with its distribution name) and the others still load.
"""
from __future__ import annotations

import importlib.metadata as md
from dataclasses import dataclass

from reasoning_rl.registry import Registry

from .base import SpecError, Verifier, check_verifier

ENTRY_POINT_GROUP = "reasoning_rl.verifiers"


@dataclass(frozen=True)
class PluginError:
    distribution: str
    entry_point: str
    message: str

    def __str__(self) -> str:
        return f"plugin error: distribution {self.distribution!r}, entry point {self.entry_point!r}: {self.message}"


REGISTRY: Registry[Verifier] = Registry("verifier")
_DISTRIBUTIONS: dict[str, str] = {}
_PLUGIN_ERRORS: list[PluginError] = []
_loaded = False


def _builtins() -> list[Verifier]:
    # imported on first lookup, not with the package: they pull sympy and math-verify, which `import verifiers`
    # (and `reasoning-rl verifiers list --help`) should not pay for
    from .code import CodeVerifier
    from .exact import ExactMatch
    from .judge import JudgeVerifier
    from .format import Boxed, Repetition, SoftLength, ThinkAnswer
    from .math_verifier import MathVerifier
    from .math_verify_verifier import MathVerifyVerifier
    from .lenient import ContainsAnswer
    from .route import Route

    return [ExactMatch(), MathVerifier(), MathVerifyVerifier(), CodeVerifier(), JudgeVerifier(), ThinkAnswer(), Boxed(),
            SoftLength(), Repetition(), Route(get), ContainsAnswer()]


def _instantiate(obj):
    if isinstance(obj, type):
        return obj()
    if isinstance(obj, Verifier) or hasattr(obj, "verify"):
        return obj
    if callable(obj):
        return obj()
    return obj


def register(verifier: Verifier, source: str = "user") -> Verifier:
    """Register a verifier object after validating its declaration."""
    check_verifier(verifier)
    if source == "user":
        load_all()  # built-ins and plugins first, so a later first-use load cannot drop this one
    REGISTRY.add(verifier.name, verifier, source)
    _DISTRIBUTIONS[verifier.name] = source
    return verifier


def load_all(reload: bool = False) -> list[PluginError]:
    """Register built-ins and discover plugins (once). Returns the plugin errors."""
    global _loaded
    if _loaded and not reload:
        return list(_PLUGIN_ERRORS)
    users = [(n, REGISTRY.get(n)) for n in list(REGISTRY) if _DISTRIBUTIONS.get(n) == "user"]
    for name in list(REGISTRY):
        REGISTRY.remove(name)
    _DISTRIBUTIONS.clear()
    _PLUGIN_ERRORS.clear()
    for v in _builtins():
        register(v, "reasoning-rl")
    for ep in md.entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else "<unknown distribution>"
        label = f"{ep.name} = {ep.value}"
        try:
            obj = _instantiate(ep.load())
            check_verifier(obj)
            if obj.name != ep.name:
                raise SpecError(f"entry point is named {ep.name!r} but the verifier calls itself {obj.name!r}")
            REGISTRY.add(obj.name, obj, dist)
            _DISTRIBUTIONS[obj.name] = dist
        except Exception as e:  # noqa: BLE001 - one broken plugin must not stop the others; it is reported
            _PLUGIN_ERRORS.append(PluginError(dist, label, f"{type(e).__name__}: {e}"))
    _loaded = True
    for name, obj in users:  # a reload keeps what the user registered by hand
        if name not in REGISTRY:
            register(obj)
    return list(_PLUGIN_ERRORS)


def get(name: str) -> Verifier:
    load_all()
    return REGISTRY.get(name)


def names() -> list[str]:
    load_all()
    return REGISTRY.names()


def distribution(name: str) -> str:
    load_all()
    REGISTRY.get(name)
    return _DISTRIBUTIONS[name]


def plugin_errors() -> list[PluginError]:
    load_all()
    return list(_PLUGIN_ERRORS)
