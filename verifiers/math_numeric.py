"""Numeric equality of two sympy expressions: the engine under the `math` verifier.

Both sides are evaluated with 30-digit mpmath at shared pseudo-random points (compiled once
per expression with lambdify; unknown functions f, g, h replaced by fixed concrete ones).
Where both are real at enough points they must agree there (the real domain decides:
sqrt(1/x) = 1/sqrt(x), but sqrt(x^2) != x); otherwise they must agree as complex numbers.
Numbers without variables compare exactly when rational (2^100 != 2^100 + 1) and otherwise
by sympy's adaptive-precision difference, relative to their size (1/2004! != 1/2006!); a
rounded decimal matches only with >= 6 significant digits, within half a unit in its last
place. `_proportional` tells whether two expressions differ by a constant factor (used for
equations and inequalities).
"""
from __future__ import annotations

import hashlib
import random

DPS = 30
N_POINTS = 12
REL_TOL = 1e-20
_POINTS_CACHE: dict[tuple[str, ...], list[dict]] = {}


def _mp():
    import mpmath

    mpmath.mp.dps = DPS
    return mpmath


def _concrete_function(name: str):
    """A fixed smooth function standing in for an unknown f, g, h (same name, same function)."""
    import sympy as sp

    h = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)
    a, b, c = 1 + (h % 7) / 10, (h % 11) / 7, 1 + (h % 5) / 9
    return sp.Lambda(sp.Symbol("_t"), sp.sin(a * sp.Symbol("_t") + b) + c * sp.Symbol("_t") / 3)


def _prepare(expr):
    from sympy.core.function import AppliedUndef

    if expr.has(AppliedUndef):
        expr = expr.replace(lambda e: isinstance(e, AppliedUndef), lambda e: _concrete_function(e.func.__name__)(*e.args))
    return expr


def _points(names: tuple[str, ...]) -> list[dict]:
    if names not in _POINTS_CACHE:
        rng = random.Random(int(hashlib.sha256(",".join(names).encode()).hexdigest()[:12], 16))  # stable
        pts = []
        for k in range(N_POINTS):
            sign = 1 if k % 2 == 0 else -1  # half the points negative, to see sqrt(x^2) != x
            pts.append({n: sign * rng.uniform(0.1, 2.3) if k > 1 else rng.uniform(0.1, 2.3) for n in names})
        _POINTS_CACHE[names] = pts
    return _POINTS_CACHE[names]


def _evaluate(expr, point: dict, symbols):
    """30-digit complex value of expr at the point, or None where undefined."""
    import sympy as sp

    mp = _mp()
    try:
        v = expr.evalf(DPS, subs={s: sp.Float(point[s.name], DPS) for s in symbols}) if symbols else expr.evalf(DPS)
        if v.has(sp.zoo, sp.oo, -sp.oo, sp.nan) or not v.is_number:
            return None
        re_, im_ = v.as_real_imag()
        c = mp.mpc(mp.mpf(str(sp.Float(re_, DPS))), mp.mpf(str(sp.Float(im_, DPS))))
        if not (mp.isfinite(c.real) and mp.isfinite(c.imag)):
            return None
        return c
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, AttributeError, RecursionError):
        return None


def _compile(expr, symbols):
    """point -> 30-digit complex value (or None): an mpmath function compiled once per expression, far cheaper
    than evalf at each point; evalf is the fallback when lambdify cannot translate the expression."""
    import sympy as sp

    mp = _mp()
    try:
        fn = sp.lambdify(symbols, expr, modules="mpmath")
    except Exception:  # noqa: BLE001 - a printer gap: fall back to evalf, which handles everything sympy knows
        return lambda point: _evaluate(expr, point, symbols)

    def at(point):
        try:
            v = mp.mpmathify(fn(*[mp.mpf(point[s.name]) for s in symbols]))
        except (ZeroDivisionError, ValueError, TypeError, OverflowError, AttributeError, NameError, RecursionError):
            return None
        if isinstance(v, mp.mpf):
            v = mp.mpc(v, 0)
        if not isinstance(v, mp.mpc) or not (mp.isfinite(v.real) and mp.isfinite(v.imag)):
            return None
        return v

    return at


def _close(a, b, tol: float = REL_TOL) -> bool:
    """Relative closeness; two values both below 1e-25 in size count as equal (sin(500 pi) vs 0)."""
    scale = max(abs(a), abs(b))
    if scale < 1e-25:
        return True
    return abs(a - b) <= tol * scale


def _constants_equal(a, b) -> bool:
    """Exact-enough equality of two closed-form numbers.

    The difference is evaluated by sympy with adaptive precision, which gets its *relative* digits
    right even when it is tiny (1/2^99 - 1/2^98 is -1/2^99, not 0), and returns ~0 only when the
    two are the same number to the working precision.
    """
    import sympy as sp

    if a == b:
        return True
    if any(x.has(sp.oo, -sp.oo, sp.zoo, sp.nan) for x in (a, b)):
        return False  # infinities are equal only when identical (oo vs -oo)
    try:
        diff = a - b
        if diff.is_Rational:  # exact numbers compare exactly: 2^100 != 2^100 + 1
            return diff == 0
        d = sp.Abs(diff.evalf(DPS, maxn=400))
        if d == 0:
            return True
        scale = sp.Max(sp.Abs(a.evalf(DPS)), sp.Abs(b.evalf(DPS)))
        if d.is_number and scale.is_number:  # sympy Floats: no underflow at 1/2006!
            return bool(d <= sp.Float("1e-20") * scale) if scale != 0 else bool(d < sp.Float("1e-100"))
    except (TypeError, ValueError, OverflowError, ZeroDivisionError, RecursionError):
        pass
    return False


def _is_real(c) -> bool:
    return abs(c.imag) <= 1e-25 * max(1, abs(c.real))


def _values(a, b):
    """Paired values of two expressions at shared points: (real pairs, complex pairs)."""
    a, b = _prepare(a), _prepare(b)
    symbols = sorted(a.free_symbols | b.free_symbols, key=lambda s: s.name)
    pts = _points(tuple(s.name for s in symbols)) if symbols else [{}]
    fa, fb = _compile(a, symbols), _compile(b, symbols)
    real, cplx = [], []
    for p in pts:
        va, vb = fa(p), fb(p)
        if va is None or vb is None:
            continue
        if _is_real(va) and _is_real(vb):
            real.append((va.real, vb.real))
        elif not _is_real(va) and not _is_real(vb):
            cplx.append((va, vb))
    return real, cplx


def expr_equal(a, b, rounded_a=None, rounded_b=None) -> bool:
    """Numeric/symbolic equality of two sympy expressions (see module docstring)."""
    import sympy as sp

    if a == b:
        return True
    if not a.free_symbols and not b.free_symbols:
        a, b = _prepare(a), _prepare(b)
        if _constants_equal(a, b):
            return True
        for r in (rounded_a, rounded_b):  # one side a rounded decimal with enough digits
            if r is not None and r[0] >= 6:
                try:
                    if bool(sp.Abs((a - b).evalf(DPS, maxn=400)) <= r[1] * (1 + sp.Rational(1, 10**9))):
                        return True
                except (TypeError, ValueError):
                    pass
        return False
    real, cplx = _values(a, b)
    if len(real) >= 3:
        return all(_close(x, y, 1e-15) for x, y in real)
    if len(real) + len(cplx) >= 3:
        return all(_close(x, y, 1e-15) for x, y in real + cplx)
    if sp.count_ops(a) + sp.count_ops(b) > 60:
        return False
    try:
        return sp.simplify(a - b) == 0
    except (TypeError, ValueError, RecursionError, AttributeError):
        return False


def _constant_ratio(f1, f2) -> float | None:
    """c if f1 = c * f2 at every sample point (c nonzero), else None."""
    real, cplx = _values(f1, f2)
    pairs = [(x, y) for x, y in real + cplx if abs(y) > 1e-25 and abs(x) > 1e-25]
    if len(pairs) < 3:
        return None
    ratios = [x / y for x, y in pairs]
    r0 = ratios[0]
    if all(_close(r, r0, 1e-12) for r in ratios):
        return complex(r0)
    return None


def _proportional(f1, f2):
    import sympy as sp

    c = _constant_ratio(f1, f2)
    if c is not None:
        return c
    try:
        n1, n2 = sp.numer(sp.together(f1)), sp.numer(sp.together(f2))
    except (TypeError, ValueError, RecursionError):
        return None
    if (n1, n2) == (f1, f2):
        return None
    return _constant_ratio(n1, n2)
