"""Plain data across the sandbox wall: exact round trips, and nothing else gets through."""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandboxes import Limits, PlainDataError
from sandboxes.plain import decode, encode

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary() \
    | st.complex_numbers(allow_nan=False)
hashable = st.recursive(scalars, lambda c: st.tuples(c, c) | st.frozensets(c, max_size=3), max_leaves=8)
values = st.recursive(scalars | hashable, lambda c: st.lists(c, max_size=4) | st.tuples(c, c)
                      | st.dictionaries(hashable, c, max_size=3) | st.sets(hashable, max_size=3), max_leaves=20)


def same(a, b) -> bool:
    """Equal and of exactly the same types all the way down (1 != True != 1.0 here; -0.0 != 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return len(a) == len(b) and all(any(same(k, j) and same(v, b[j]) for j in b if j == k) for k, v in a.items())
    if isinstance(a, (set, frozenset)):
        return len(a) == len(b) and all(any(same(x, y) for y in b) for x in a)
    if isinstance(a, (float, complex)):
        return repr(a) == repr(b)
    return a == b


@given(values)
def test_round_trip_through_json_is_exact(v):
    back = decode(json.loads(json.dumps(encode(v))))
    assert same(back, v)


def test_non_finite_floats_and_huge_ints_survive():
    for v in [math.inf, -math.inf, 10 ** 400, -(2 ** 80)]:
        assert decode(json.loads(json.dumps(encode(v)))) == v
    assert math.isnan(decode(encode(math.nan)))


@pytest.mark.parametrize("bad", [
    type("Forged", (int,), {"__eq__": lambda s, o: True, "__hash__": int.__hash__})(3),  # subclass of int
    type("S", (str,), {})("x"),
    object(),
    lambda: 1,
    [1, [2, object()]],
])
def test_anything_but_exact_builtins_is_refused(bad):
    with pytest.raises(PlainDataError):
        encode(bad)


def test_decode_refuses_unknown_tags():
    with pytest.raises(PlainDataError):
        decode({"$pickle": "..."})


def test_limits_validation_names_field_and_value():
    with pytest.raises(ValueError, match=r"Limits.memory_mb .* got 0"):
        Limits(memory_mb=0)
    with pytest.raises(ValueError, match="unknown key 'mem'"):
        Limits.of({"mem": 5})
    assert Limits.of({"wall_s": 2}).wall_s == 2
