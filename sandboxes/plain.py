"""Plain data across the sandbox wall: a strict, tagged JSON encoding of builtin values.

Values cross between the candidate's process and the checker only as plain data. `encode`
accepts *exactly* the builtin types (None, bool, int, float, complex, str, bytes, list,
tuple, dict, set, frozenset) and refuses subclasses, so an object with a forged `__eq__`,
`__hash__` or `__repr__` can never reach a comparison: the checker compares fresh builtins
it decoded itself. Tags keep tuples, sets, bytes, non-string keys, big ints and non-finite
floats exact. Standard library only; loaded by the zygote.

Not handled on purpose: user classes, generators, functions (a test that needs them must
use the `unittest`/`assert` kinds on plain results), and shared/cyclic references.
"""
from __future__ import annotations

import base64
import math

MAX_DEPTH = 200
MAX_NODES = 2_000_000
_SMALL_INT = 1 << 53


class PlainDataError(TypeError):
    """A value that is not plain data (or is too deep/large to carry)."""


def encode(value):
    budget = [MAX_NODES]

    def enc(x, depth):
        budget[0] -= 1
        if budget[0] < 0:
            raise PlainDataError(f"value has more than {MAX_NODES} parts")
        if depth > MAX_DEPTH:
            raise PlainDataError(f"value is nested deeper than {MAX_DEPTH}")
        t = type(x)
        if x is None or t is bool or t is str:
            return x
        if t is int:
            return x if -_SMALL_INT < x < _SMALL_INT else {"$int": format(x, "x")}
        if t is float:
            return x if math.isfinite(x) else {"$float": repr(x)}
        if t is list:
            return [enc(v, depth + 1) for v in x]
        if t is tuple:
            return {"$tuple": [enc(v, depth + 1) for v in x]}
        if t is dict:
            return {"$dict": [[enc(k, depth + 1), enc(v, depth + 1)] for k, v in x.items()]}
        if t is set or t is frozenset:
            return {"$" + t.__name__: [enc(v, depth + 1) for v in x]}
        if t is bytes:
            return {"$bytes": base64.b64encode(x).decode()}
        if t is complex:
            return {"$complex": [enc(x.real, depth + 1), enc(x.imag, depth + 1)]}
        raise PlainDataError(f"value of type {t.__module__}.{t.__qualname__} is not plain data")

    return enc(value, 0)


def decode(data):
    def dec(x, depth):
        if depth > MAX_DEPTH + 1:
            raise PlainDataError(f"encoded value is nested deeper than {MAX_DEPTH}")
        t = type(x)
        if x is None or t in (bool, str, int, float):
            return x
        if t is list:
            return [dec(v, depth + 1) for v in x]
        if t is dict and len(x) == 1:
            (tag, v), = x.items()
            if tag == "$int" and type(v) is str:
                return int(v, 16)
            if tag == "$float" and v in ("nan", "inf", "-inf"):
                return float(v)
            if tag == "$bytes" and type(v) is str:
                return base64.b64decode(v, validate=True)
            if type(v) is list:
                if tag == "$tuple":
                    return tuple(dec(i, depth + 1) for i in v)
                if tag == "$set":
                    return {dec(i, depth + 1) for i in v}
                if tag == "$frozenset":
                    return frozenset(dec(i, depth + 1) for i in v)
                if tag == "$complex" and len(v) == 2:
                    return complex(dec(v[0], depth + 1), dec(v[1], depth + 1))
                if tag == "$dict" and all(type(p) is list and len(p) == 2 for p in v):
                    return {dec(k, depth + 1): dec(w, depth + 1) for k, w in v}
        raise PlainDataError(f"not an encoded plain value: {str(x)[:80]!r}")

    return dec(data, 0)
