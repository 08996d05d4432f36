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
    object(),
    lambda: 1,
    [1, [2, object()]],
    type("Opaque", (), {"__eq__": lambda s, o: True})(),
])
def test_anything_but_builtins_and_standard_values_is_refused(bad):
    with pytest.raises(PlainDataError):
        encode(bad)


@pytest.mark.parametrize("forged,base,value", [
    (type("Forged", (int,), {"__eq__": lambda s, o: True, "__hash__": int.__hash__,
                             "__int__": lambda s: 99, "__index__": lambda s: 99})(3), int, 3),
    (type("S", (str,), {"__str__": lambda s: "lie", "__eq__": lambda s, o: True, "__hash__": str.__hash__})("x"),
     str, "x"),
    (type("L", (list,), {"__iter__": lambda s: iter([0]), "__eq__": lambda s, o: True})([1, 2]), list, [1, 2]),
    (type("T", (tuple,), {"__iter__": lambda s: iter([0]), "__len__": lambda s: 0})((1, 2)), tuple, (1, 2)),
    (type("D", (dict,), {"items": lambda s: [("a", 1)], "__eq__": lambda s, o: True})(z=9), dict, {"z": 9}),
])
def test_builtin_subclasses_cross_as_their_base_with_the_forgery_left_behind(forged, base, value):
    out = decode(json.loads(json.dumps(encode(forged))))
    assert type(out) is base and out == value  # read through the base type's own methods, not the subclass's


def test_decode_refuses_unknown_tags():
    with pytest.raises(PlainDataError):
        decode({"$pickle": "..."})


def test_limits_validation_names_field_and_value():
    with pytest.raises(ValueError, match=r"Limits.memory_mb .* got 0"):
        Limits(memory_mb=0)
    with pytest.raises(ValueError, match="unknown key 'mem'"):
        Limits.of({"mem": 5})
    assert Limits.of({"wall_s": 2}).wall_s == 2
