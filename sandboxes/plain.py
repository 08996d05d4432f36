"""Plain data across the sandbox wall: a strict, tagged JSON encoding of builtin values.

Values cross between the candidate's process and the checker only as plain data. `encode`
accepts the builtin types (None, bool, int, float, complex, str, bytes, list, tuple, dict,
set, frozenset) and the standard value types a correct program returns (Counter,
defaultdict, OrderedDict, namedtuples, deque, Fraction, Decimal). Subclasses of a builtin
are read through the *builtin's* own methods (`dict.items(x)`, `tuple.__getitem__`,
`int.__int__`, ...) and cross as that builtin, so an object with a forged `__eq__`,
`__iter__`, `__hash__` or `__repr__` can never reach a comparison: the checker compares
fresh builtins it decoded itself (a Counter arrives as a dict, a namedtuple as a tuple, a
deque as a list; a Fraction or Decimal as a new one built from its parts). Tags keep tuples,
sets, bytes, non-string keys, big ints and non-finite floats exact. Standard library only;
loaded by the zygote.

Not handled on purpose: user classes, generators, functions (a test that needs them must
use the `unittest`/`assert` kinds on plain results), and shared/cyclic references.
"""
from __future__ import annotations

import base64
import collections
import decimal
import fractions
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
        return enc_standard(x, t, depth)

    def enc_standard(x, t, depth):
        """Standard value types and builtin subclasses, read through the base type's own methods."""
        if t is fractions.Fraction or isinstance(x, fractions.Fraction):
            num, den = fractions.Fraction.numerator.fget(x), fractions.Fraction.denominator.fget(x)
            return {"$fraction": [enc(int.__int__(num), depth + 1), enc(int.__int__(den), depth + 1)]}
        if isinstance(x, decimal.Decimal):
            return {"$decimal": decimal.Decimal.__str__(x)}
        if isinstance(x, collections.deque):
            return [enc(v, depth + 1) for v in collections.deque.__iter__(x)]
        if isinstance(x, bool):
            raise PlainDataError(f"value of type {t.__module__}.{t.__qualname__} is not plain data")
        for base, read in _BASES:
            if isinstance(x, base):
                return enc(read(x), depth + 1)  # a fresh builtin, then encoded as one
        raise PlainDataError(f"value of type {t.__module__}.{t.__qualname__} is not plain data")

    return enc(value, 0)


# builtin bases of accepted subclasses (Counter, defaultdict, OrderedDict are dicts; namedtuples tuples),
# each read into a fresh builtin through the base's own methods, never the subclass's
_BASES = (
    (dict, lambda x: {k: v for k, v in dict.items(x)}),
    (tuple, lambda x: tuple(tuple.__getitem__(x, i) for i in range(tuple.__len__(x)))),
    (list, lambda x: [list.__getitem__(x, i) for i in range(list.__len__(x))]),
    (str, str.__str__),
    (int, int.__int__),
    (float, float.__float__),
    (frozenset, lambda x: frozenset(frozenset.__iter__(x))),
    (set, lambda x: set(set.__iter__(x))),
    (bytes, bytes.__bytes__),
)


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
            if tag == "$decimal" and type(v) is str:
                return decimal.Decimal(v)
            if type(v) is list:
                if tag == "$tuple":
                    return tuple(dec(i, depth + 1) for i in v)
                if tag == "$set":
                    return {dec(i, depth + 1) for i in v}
                if tag == "$frozenset":
                    return frozenset(dec(i, depth + 1) for i in v)
                if tag == "$fraction" and len(v) == 2:
                    return fractions.Fraction(dec(v[0], depth + 1), dec(v[1], depth + 1))
                if tag == "$complex" and len(v) == 2:
                    return complex(dec(v[0], depth + 1), dec(v[1], depth + 1))
                if tag == "$dict" and all(type(p) is list and len(p) == 2 for p in v):
                    return {dec(k, depth + 1): dec(w, depth + 1) for k, w in v}
        raise PlainDataError(f"not an encoded plain value: {str(x)[:80]!r}")

    return dec(data, 0)
