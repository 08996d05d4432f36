"""A plain-text answer to a typed, comparable value (`Ans`) for the `math` verifier.

Kinds: "expr" (a sympy expression, numbers included), "eq" (lhs, rhs), "rel" (an
inequality), "interval" (a sympy Interval/Union), "set" (unordered items), "seq" (ordered
items, with their bracket), "matrix", "choice" (a letter), "text", "time" (minutes).

Safety: model output is never handed to `eval` unchecked: every expression goes through
`safe_sympy.safe_sympify` (a small alphabet, a whitelisted namespace, sizes checked before
anything is built). Everything else is bounded by the runtime's wall-clock kill.
"""
from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass, field
from typing import Any

from .math_normalize import latex_to_text, strip_number_format, strip_units
from .safe_sympy import _PROTECTED, ParseFailure, safe_sympify


@dataclass
class Ans:
    kind: str
    value: Any
    bracket: str = ""  # for "seq": "(", "[" or "" (bare list)
    rounded: tuple[int, Any] | None = None  # decimal literal: (significant digits, half-ulp as sympy Rational)
    percent: bool = False
    raw: str = ""
    meta: dict = field(default_factory=dict)


# ---------------------------------------------------------------- structure
def split_top(s: str, seps: str = ",") -> list[str]:
    """Split on separators at nesting depth 0 of (), [], {}."""
    out, depth, cur = [], 0, []
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch in seps and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return [p.strip() for p in out]


def _outer(s: str) -> tuple[str, str, str] | None:
    """If s is one bracketed group, (open, inner, close)."""
    if len(s) < 2 or s[0] not in "([{" or s[-1] not in ")]}":
        return None
    depth = 0
    for k, ch in enumerate(s):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0 and k != len(s) - 1:
                return None
    return s[0], s[1:-1], s[-1]


_DECIMAL = re.compile(r"^[-+]?(\d*)\.?(\d*)$")
_SCI = re.compile(r"^([-+]?\d*\.?\d+)\s*(?:\*|x|×)\s*10\s*\*\*\s*\(?\s*([-+]?\d+)\s*\)?$|^([-+]?\d*\.?\d+)[eE]([-+]?\d+)$")


def _rounding(t: str):
    """(significant digits, half-ulp) of a decimal literal, or None if t is not one."""
    import sympy as sp

    t = t.replace(" ", "").replace("^", "**")
    m = _SCI.match(t)
    exp10 = 0
    if m:
        mant = m.group(1) or m.group(3)
        exp10 = int(m.group(2) or m.group(4))
    else:
        mant = t
    if not re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+)", mant):
        return None  # integers are exact, not rounded
    digits = mant.lstrip("+-").replace(".", "").lstrip("0")
    decimals = len(mant.split(".")[1]) if "." in mant else 0
    return len(digits), sp.Rational(1, 2) * sp.Rational(10) ** (exp10 - decimals)


_MATRIX = re.compile(r"\\begin\{([pbvBV]?matrix|array)\}(?:\{[^{}]*\})?(.*?)\\end\{\1\}", re.S)


_PLAIN_NUMBER = re.compile(r"\s*([-+]?)(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?:\s*/\s*(\d+))?\s*")


def _fast_number(s: str) -> Ans | None:
    """Integers, decimals and a/b fractions without sympy's parser: the common case in RL."""
    import sympy as sp

    m = _PLAIN_NUMBER.fullmatch(s)
    if not m or (m.group(3) and m.group(4)):
        return None
    sign, whole, frac, den = m.groups()
    digits = whole.replace(",", "")
    if len(digits) > 4000:
        return None
    if frac is not None:
        v = sp.Rational(int(digits + frac), 10 ** len(frac))
        rounded = (len((digits + frac).lstrip("0")), sp.Rational(1, 2) / 10 ** len(frac))
    else:
        v, rounded = sp.Integer(int(digits)), None
        if den is not None:
            if int(den) == 0:
                return None
            v = sp.Rational(int(digits), int(den))
    return Ans("expr", -v if sign == "-" else v, rounded=rounded, raw=s)


@functools.lru_cache(maxsize=4096)
def _parse_cached(answer: str) -> Ans:
    return _fast_number(answer) or _parse_answer(answer)


def parse_answer(answer: str) -> Ans:
    """The top-level parser: raw answer text (LaTeX or plain) -> Ans. Cached (references repeat in a group);
    callers must treat the result as read-only."""
    return _parse_cached(answer)


_REPEATING = re.compile(r"([-+]?)(\d+)\.(\d*)(?:\\overline\s*\{(\d+)\}|\\dot\s*\{?(\d)\}?|\((\d+)\))")
_ELLIPSIS = re.compile(r"([-+]?)(\d+)\.(\d+)(?:\.\.\.|\\ldots|\\cdots|…)")


_REPEATING_ANY = re.compile(r"[-+]?\d+\.\d*(?:\\overline\s*\{\d+\}|\(\d+\))|[-+]?\d+\.\d+(?:\.\.\.|\\ldots|…)")


def repeating_decimal(s: str):
    """The rational a repeating decimal writes, or None: `0.\\overline{3}`, `0.1\\overline{6}`, `0.(3)`, and
    `0.333...` / `0.1666...` / `0.142857142857...` (a trailing ellipsis after a block written at least twice, a
    single digit at least three times)."""
    import sympy as sp

    t = s.strip().replace(" ", "")
    m = _REPEATING.fullmatch(t)
    if m:
        sign, whole, fixed, rep = m.group(1), m.group(2), m.group(3), m.group(4) or m.group(5) or m.group(6)
    else:
        m = _ELLIPSIS.fullmatch(t)
        if not m:
            return None
        sign, whole, digits = m.groups()
        for p in range(1, len(digits) // 2 + 1):
            block, times = digits[-p:], 3 if p == 1 else 2
            if len(digits) >= p * times and digits.endswith(block * times):
                head = digits[:len(digits) - p * times]
                while head.endswith(block):
                    head = head[:-p]
                fixed, rep = head, block
                break
        else:
            return None
    # whole.fixed(rep): (whole.fixed rep - whole.fixed) / (10^|fixed| (10^|rep| - 1)) ... written as one fraction
    v = sp.Integer(int(whole)) + (sp.Rational(int(fixed), 10 ** len(fixed)) if fixed else 0) + \
        sp.Rational(int(rep), (10 ** len(rep) - 1) * 10 ** len(fixed))
    return -v if sign == "-" else v


def _parse_answer(answer: str) -> Ans:
    import sympy as sp

    raw = answer
    s = answer.strip()
    s = re.sub(r"^\\\[|\\\]$|^\$+|\$+$|^\\\(|\\\)$", "", s).strip()
    s = re.sub(r"^\\(?=\d)", "", s)  # "\\15": an escaped dollar whose sign was lost (\\$15)
    rep = repeating_decimal(s)
    if rep is not None:
        return _expr(rep, raw)
    # a repeating decimal inside a larger answer ("x = 0.\\overline{123}"): written as its fraction
    s = _REPEATING_ANY.sub(lambda m: f"({repeating_decimal(m.group(0)) or m.group(0)})", s)
    s = re.sub(r"^(?:\\\$|\$(?=\s*[\d.][\d,.]*\s*$))\s*", "", s)  # currency: \$1,500 or $10.5
    if re.search(r"\\\\[A-Za-z]", s) and not re.search(r"(?<!\\)\\[A-Za-z]", s):
        s = s.replace("\\\\", "\\")  # over-escaped LaTeX: every backslash doubled
    s = s.replace("=/=", "!=")
    if "\\begin" in s:
        m = _MATRIX.search(s)
        if m:
            env, body = m.group(1), m.group(2)
            rows = [r for r in re.split(r"\\\\", body) if r.strip()]
            cells = [[parse_answer(c) for c in r.split("&")] for r in rows]
            if env == "vmatrix":
                return _expr(sp.Matrix([[c.value for c in r] for r in cells]).det(), raw)
            if len({len(r) for r in cells}) != 1:
                raise ParseFailure("ragged matrix")
            return Ans("matrix", cells, raw=raw)
    # multiple-choice letter: "B", "(B)", "\textbf{B}", "B." / "B) ..." / "C. x = 42"
    tail = re.search(r"\s*\\(?:text|textbf|textrm|mathrm|mbox)\s*\{\s*[A-Za-z][A-Za-z .]*\}\s*$", s)
    if tail and s[:tail.start()].strip() and not re.search(r"(?:and|or|[AaPp]\.?\s*[Mm]\.?)\s*\}\s*$", tail.group(0)):
        s = s[:tail.start()].strip()  # "\frac{1}{3} \text{meters}": a unit after a value
    m = re.fullmatch(r"(\w+)_\{?(\d+)\}?", s)  # a numeral in a base: 4210_{7}
    if m:
        return Ans("text", f"{m.group(1)}_{m.group(2)}", raw=raw)
    plain = latex_to_text(strip_number_format(s))
    plain = re.sub(r"(?<![\w.:,])0+(?=\d)", "", plain)  # leading zeros: 033 -> 33 (not a thousands group: 4,007)
    m = re.fullmatch(r"\(?([A-J])\)?(?:[.:)。](?:\s+.*)?|\s+[A-Z][a-z]+.*)?", plain)
    if m and not re.fullmatch(r"[A-J]\s*[=<>].*", plain):
        return Ans("choice", m.group(1), raw=raw)
    if re.fullmatch(r"\(?([A-J])\)?\s*(?:\*|\^|\+|-).+", plain):
        return Ans("text", plain, raw=raw)
    # times "20:34", "08:34 PM"
    m = re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}))?\s*([AaPp])?\.?\s*[Mm]?\.?", plain)
    if m and (m.group(3) or m.group(4)):  # "20:34" alone stays a ratio; equivalence converts when needed
        h, mi = int(m.group(1)), int(m.group(2))
        if m.group(4) and m.group(4).lower() == "p" and h < 12:
            h += 12
        return Ans("time", h * 60 + mi + int(m.group(3) or 0) / 60, raw=raw)
    m = re.fullmatch(r"[^=<>]*:[^=<>]*=\s*([^=<>]+)", plain)  # V_1:V_2 = 11:21 -> 11:21
    if m:
        plain = m.group(1).strip()
    if ":" in plain and not re.search(r"[=<>]", plain):
        return Ans("seq", [parse_answer(p) for p in plain.split(":")], bracket=":", raw=raw)
    # mixed numbers "1 1/2", "2\frac58"
    mm = re.fullmatch(r"([-+]?)(\d+)\s*\\[dt]?frac\s*\{?(\d+)\}?\s*\{?(\d+)\}?", s) or \
        re.fullmatch(r"([-+]?)(\d+)\s+(\d+)\s*/\s*(\d+)", s)
    if mm:
        v = sp.Integer(mm.group(2)) + sp.Rational(int(mm.group(3)), int(mm.group(4)))
        return _expr(-v if mm.group(1) == "-" else v, raw)
    t = strip_number_format(strip_units(plain))  # "4,007 dollars" -> "4,007" -> "4007"
    t = re.sub(r"\s*DEGREE\s*$", "", t).strip()
    t = re.sub(r"\\+$", "", t).strip()
    if "≈" in t:  # "exact ≈ approximate": the exact part is the answer; "x ≈ 11": the value
        left, right = t.split("≈", 1)
        t = right.strip() if re.fullmatch(r"\s*[A-Za-z]\w*\s*", left) else left.strip()
    if t.endswith("%"):
        return dataclasses.replace(parse_answer(t[:-1]), percent=True)
    return _structure(t, raw)


def _expr(v, raw: str, rounded=None) -> Ans:
    return Ans("expr", v, rounded=rounded, raw=raw)


def _structure(t: str, raw: str) -> Ans:
    import sympy as sp

    if not t:
        raise ParseFailure("empty answer")
    t = strip_units(t)
    if "±" in t:  # a ± b -> {a + b, a - b}
        return Ans("set", [_structure(t.replace("±", "+", 1), raw), _structure(t.replace("±", "-", 1), raw)], raw=raw)
    if re.search(r"\s(?:and|or)\s|\)\s*(?:and|or)\s*\(", t) and "=" not in t.split(" and ")[0][-1:]:
        parts = [p for p in re.split(r"\s*(?<![A-Za-z])(?:and|or)(?![A-Za-z])\s*", t) if p.strip(" ,")]
        if len(parts) >= 2:  # "6 and 8", "(11,7) or (7,11)" in a reference: a list of answers
            return _structure(", ".join(p.strip(" ,") for p in parts), raw)
    m = re.fullmatch(r"\(([^()]*)\)\s*=\s*(\(.*\))", t)  # (p, q) = (3, 2)
    if m and len(split_top(m.group(1))) == len(split_top(_outer(m.group(2))[1] if _outer(m.group(2)) else "")):
        return _structure(m.group(2), raw)
    # "x in S"
    m = re.fullmatch(r"[A-Za-z]\w*\s+in\s+(.+)", t)
    if m:
        inner = _structure(m.group(1), raw)
        if inner.kind in ("interval", "seq", "set"):
            return _as_interval(inner) if inner.kind == "seq" and len(inner.value) == 2 and inner.bracket else inner
    if " U " in t:
        parts = [_structure(p.strip(), raw) for p in t.split(" U ")]
        ivs = [_as_interval(p) for p in parts]
        return Ans("interval", sp.Union(*[i.value for i in ivs]), raw=raw)
    o = _outer(t)
    if o and o[0] in "([" and len(split_top(o[1])) == 1 and o[1].strip():
        return _structure(o[1].strip(), raw)  # [45], (x = 1): one element, no brackets needed
    if o and o[0] == "{" and o[2] == "}":
        items = [_structure(p, raw) for p in split_top(o[1]) if p]
        return Ans("set", items, raw=raw) if len(items) != 1 else items[0]
    if o and o[0] in "([" and o[2] in ")]":
        parts = split_top(o[1])
        if len(parts) >= 2:
            items = [_structure(p, raw) for p in parts]
            a = Ans("seq", items, bracket=o[0] + o[2], raw=raw)
            if len(items) == 2 and any(i.kind == "expr" and i.value in (sp.oo, -sp.oo) for i in items):
                return _as_interval(a)
            return a
    parts = split_top(t)
    if len(parts) >= 2:
        items = [_structure(p, raw) for p in parts if p and p.lower() not in ("and",)]
        return Ans("set", items, raw=raw)
    t2 = re.sub(r"^(?:and)\s+", "", t)
    # relations
    rel = re.split(r"(<=|>=|!=|==|=|<|>)", t2)
    if len(rel) >= 3:
        sides = rel[0::2]
        ops = rel[1::2]
        if ops and all(op == "=" for op in ops):
            exprs = [_side(x) for x in sides]
            if exprs[-1] is None or any(e is None and len(re.findall(r"[A-Za-z]", x)) < 2
                                        for e, x in zip(exprs, sides)):
                raise ParseFailure(f"cannot parse equation {t2[:60]!r}")  # "y =/= x" is not "y = x"
            return Ans("eq", exprs, raw=raw)
        if len(ops) == 1:
            lhs, rhs = safe_sympify(sides[0]), safe_sympify(sides[1])
            return Ans("rel", (lhs, ops[0], rhs), raw=raw)
        if len(ops) == 2 and ops[0] in ("<", "<=") and ops[1] in ("<", "<="):
            a, x, b = (safe_sympify(v) for v in sides)
            return Ans("rel", (a, ops[0], x, ops[1], b), raw=raw)
        raise ParseFailure(f"unsupported relation chain {t2[:60]!r}")
    if re.fullmatch(r"[A-Za-z]{2,}(?:\s+[A-Za-z]{2,})*", t2) and t2.lower() not in _PROTECTED:
        return Ans("text", t2.lower(), raw=raw)
    v = safe_sympify(t2)
    return _expr(v, raw, rounded=_rounding(t2))


def _side(x: str):
    """One side of an equation; None if it cannot be parsed (fine for a non-final side of a chain)."""
    x = x.strip()
    o = _outer(x)
    if o and o[0] == "[" and len(split_top(o[1])) == 1:
        x = o[1]
    try:
        return safe_sympify(x)
    except ParseFailure:
        return None


def _as_interval(a: Ans) -> Ans:
    import sympy as sp

    if a.kind == "interval":
        return a
    if a.kind != "seq" or len(a.value) != 2 or a.bracket[:1] not in "([" or a.bracket[1:] not in ")]":
        raise ParseFailure("not an interval")
    lo, hi = a.value
    if lo.kind != "expr" or hi.kind != "expr":
        raise ParseFailure("interval endpoints must be numbers")
    try:
        iv = sp.Interval(lo.value, hi.value, left_open=a.bracket[0] == "(", right_open=a.bracket[1] == ")")
    except (TypeError, ValueError) as e:
        raise ParseFailure(f"bad interval: {e}") from None
    return Ans("interval", iv, raw=a.raw)
