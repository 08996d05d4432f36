"""One generic name -> object registry, used for advantages, losses, verifiers,
filters and samplers.

It refuses a duplicate name (two plugins silently shadowing each other is how a
reward quietly changes), and an unknown name's error lists the valid ones.
Standard library only.
"""
from __future__ import annotations

from typing import Callable, Generic, Iterator, TypeVar

from .errors import UserError

T = TypeVar("T")

__all__ = ["Registry", "DuplicateNameError", "UnknownNameError"]


class DuplicateNameError(ValueError):
    pass


class UnknownNameError(UserError, KeyError):
    def __str__(self) -> str:  # KeyError quotes its argument; we want the plain message
        return str(self.args[0])


class Registry(Generic[T]):
    """A named collection. `kind` appears in error messages ("unknown advantage estimator 'x'")."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._sources: dict[str, str] = {}

    def add(self, name: str, obj: T, source: str = "builtin") -> T:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{self.kind} name must be a non-empty string, got {name!r}")
        if name in self._items:
            raise DuplicateNameError(
                f"{self.kind} {name!r} is already registered (from {self._sources[name]}); refusing {source}")
        self._items[name] = obj
        self._sources[name] = source
        return obj

    def register(self, name: str, source: str = "builtin") -> Callable[[T], T]:
        """Decorator form: `@REG.register("grpo")`."""

        def deco(obj: T) -> T:
            return self.add(name, obj, source)

        return deco

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            valid = ", ".join(sorted(self._items)) or "(none registered)"
            raise UnknownNameError(f"unknown {self.kind} {name!r}; valid: {valid}") from None

    def source(self, name: str) -> str:
        self.get(name)
        return self._sources[name]

    def remove(self, name: str) -> None:
        self.get(name)
        del self._items[name], self._sources[name]

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)
