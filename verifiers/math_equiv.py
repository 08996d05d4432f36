"""Is a predicted answer equivalent to the gold one? (the `math` verifier's judgement)

Numbers and expressions are compared by evaluation, not by symbolic simplification:
both sides are evaluated with 30-digit mpmath at shared pseudo-random points (unknown
functions f, g, h replaced by fixed concrete ones). Where both are real at enough
points, they must agree there (the real domain decides: sqrt(1/x) = 1/sqrt(x), but
sqrt(x^2) != x); otherwise they must agree as complex numbers. Closed forms that agree
to 25 digits at every point are taken as equal; decimals are exact rationals, so
0.33 != 1/3, and a rounded decimal matches only with >= 6 significant digits and within
half a unit in its last place. Relative comparison everywhere: 1/2004! != 1/2006!.

Equations match when they are the same equation (one side a lone variable or function
and the other sides equal), or when (L1 - R1) and (L2 - R2), or their numerators, are
proportional. Inequalities in one variable compare their solution sets; in several,
proportional with the right sign. Sets ignore order and duplicates; tuples and lists
don't ignore order; an unbracketed list is a set.
"""
from __future__ import annotations

import hashlib
import random

from .math_parse import Ans, ParseFailure

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
    import sympy as sp
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
    """point -> 30-digit complex value (or None): an mpmath function compiled once per expression, which is
    ~20x faster than evalf at each point; evalf is the fallback when lambdify cannot translate the expression."""
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


def _lone(x) -> bool:
    """A bare variable or an unknown function applied to variables (y, f(x))."""
    from sympy.core.function import AppliedUndef

    return bool(getattr(x, "is_Symbol", False)) or isinstance(x, AppliedUndef)


def _name_like(x) -> bool:
    """A quantity's name rather than a formula: only symbols and products/ratios/abs of them (NO/BO, |AB|)."""
    import sympy as sp

    if x.is_Symbol or not x.free_symbols:
        return bool(x.is_Symbol)
    for n in sp.preorder_traversal(x):
        if n in (sp.Integer(1), sp.Integer(-1)):
            continue
        if not isinstance(n, (sp.Symbol, sp.Mul, sp.Pow, sp.Abs)) or (isinstance(n, sp.Pow) and n.exp != -1):
            return False
    return True


def _own_names(x) -> set:
    """The names a lone left-hand side defines: {y} for y, {} for f(x) (f is not a variable)."""
    return {x} if getattr(x, "is_Symbol", False) else set()


def eq_equal(g: list, p: list) -> bool:
    if len(g) != 2 or len(p) != 2:  # chains a = b = c: compare the last value
        return g[-1] is not None and p[-1] is not None and expr_equal(g[-1], p[-1])
    gl, gr = g
    pl, pr = p
    if None in (gl, gr, pl, pr):
        return False
    if _lone(gl) and _lone(pl) and gl == pl and expr_equal(gr, pr):
        return True
    if _lone(gl) and _lone(pl) and gl != pl and not (_own_names(gl) & pr.free_symbols) and \
            not (_own_names(pl) & gr.free_symbols) and expr_equal(gr, pr):
        return True  # f(x) = 2x + 3 vs y = 2x + 3: the same function, named differently
    f1, f2 = gl - gr, pl - pr
    if not f1.free_symbols and not f2.free_symbols:  # 110.304 = 23^1.5 vs 23^1.5 = 110.304
        return (expr_equal(gl, pl) and expr_equal(gr, pr)) or (expr_equal(gl, pr) and expr_equal(gr, pl))
    return _proportional(f1, f2) is not None


_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}


def _rel_set(rel):
    import sympy as sp

    lhs, op, rhs = rel
    f = lhs - rhs
    syms = f.free_symbols
    if len(syms) != 1:
        return None
    x = next(iter(syms))
    if not f.is_rational_function(x):
        return None  # solveset on transcendental inequalities can run for minutes
    rel_obj = {"<": sp.Lt, "<=": sp.Le, ">": sp.Gt, ">=": sp.Ge, "!=": sp.Ne}[op](f, 0)
    try:
        return sp.solveset(rel_obj, x, sp.S.Reals)
    except (NotImplementedError, TypeError, ValueError, RecursionError):
        return None


def sets_equal(s1, s2) -> bool:
    import sympy as sp

    if s1 == s2:
        return True
    try:
        d = sp.Union(sp.Complement(s1, s2), sp.Complement(s2, s1))
        return d == sp.S.EmptySet or d.is_empty is True
    except (TypeError, ValueError, RecursionError):
        return False


def rel_equal(g: tuple, p: tuple) -> bool:
    if len(g) != 3 or len(p) != 3:
        if len(g) == 5 and len(p) == 5:
            return g[1] == p[1] and g[3] == p[3] and all(expr_equal(a, b) for a, b in zip(g[0::2], p[0::2]))
        return False
    sg, sp_ = _rel_set(g), _rel_set(p)
    if sg is not None and sp_ is not None:
        return sets_equal(sg, sp_)
    c = _proportional(g[0] - g[2], p[0] - p[2])
    if c is None or abs(c.imag) > 1e-12:
        return False
    return p[1] == (g[1] if c.real > 0 else _FLIP.get(g[1]))


def _rel_to_interval(rel):
    """The solution set of a one-variable inequality, or of a chain a < x <= b (x a lone variable or f(x))."""
    import sympy as sp

    if len(rel) == 5:
        a, op1, x, op2, b = rel
        if not (_lone(x) or _name_like(x)) or a.free_symbols or b.free_symbols:
            return None
        try:
            return sp.Interval(a, b, left_open=op1 == "<", right_open=op2 == "<")
        except (TypeError, ValueError):
            return None
    return _rel_set(rel)


def _match_sets(gs: list[Ans], ps: list[Ans]) -> bool:
    if not gs or not ps:
        return False
    return all(any(equivalent(g, p) for p in ps) for g in gs) and all(any(equivalent(g, p) for g in gs) for p in ps)


def _lone_values(items: list[Ans]) -> list[Ans] | None:
    """[x = 1, y = 2] -> [1, 2] (all lone-variable equations), else None."""
    out = []
    for a in items:
        if a.kind != "eq" or len(a.value) != 2 or None in a.value or not (_lone(a.value[0]) or _name_like(a.value[0])):
            return None
        out.append(Ans("expr", a.value[1]))
    return out


def _solve_system(items: list[Ans]):
    """Solutions of a small polynomial system; ValueError for anything else (solve can take minutes)."""
    import sympy as sp

    if any(a.kind != "eq" or len(a.value) != 2 or None in a.value for a in items):
        raise ValueError("not a system of equations")
    fs = [a.value[0] - a.value[1] for a in items]
    syms = sorted(set().union(*[f.free_symbols for f in fs]), key=lambda s: s.name)
    if not syms or len(syms) > 4 or len(fs) > 6:
        raise ValueError("system too large")
    for f in fs:
        num = sp.numer(sp.together(f))
        if not num.is_polynomial(*syms) or sp.Poly(num, *syms).total_degree() > 6:
            raise ValueError("not a small polynomial system")
    sol = sp.solve([sp.Eq(a.value[0], a.value[1]) for a in items], syms, dict=True)
    return syms, sol


def systems_equal(g: list[Ans], p: list[Ans]) -> bool:
    import sympy as sp

    try:
        gs, gsol = _solve_system(g)
        ps, psol = _solve_system(p)
    except (NotImplementedError, TypeError, ValueError, RecursionError, sp.SympifyError):
        return False
    if [s.name for s in gs] != [s.name for s in ps] or not gsol or not psol:
        return False
    if any(len(d) != len(gs) for d in gsol + psol):
        return False  # a parametric family: not compared by solutions

    def same(d1, d2):
        return all(expr_equal(d1[s], d2[s]) for s in d1)

    return all(any(same(a, b) for b in psol) for a in gsol) and all(any(same(a, b) for a in gsol) for b in psol)


def _minutes(a: Ans) -> float | None:
    """A clock time in minutes: a parsed time, or an h:m(:s) ratio of plain numbers."""
    if a.kind == "time":
        return a.value
    if a.kind == "seq" and a.bracket == ":" and 2 <= len(a.value) <= 3 and all(
            x.kind == "expr" and x.value.is_Integer for x in a.value):
        h, m = int(a.value[0].value), int(a.value[1].value)
        sec = int(a.value[2].value) if len(a.value) == 3 else 0
        return h * 60 + m + sec / 60 if h < 24 and m < 60 and sec < 60 else None
    return None


def _both_systems(a: list[Ans], b: list[Ans]) -> bool:
    return bool(a) and bool(b) and all(x.kind == "eq" for x in a) and all(x.kind == "eq" for x in b)


def equivalent(g: Ans, p: Ans) -> bool:
    """Is prediction p equivalent to gold g?"""
    import sympy as sp

    gk, pk = g.kind, p.kind
    if gk == "choice":
        return pk == "choice" and p.value == g.value
    if gk == "text" or pk == "text":
        return gk == pk and g.value.replace(" ", "") == p.value.replace(" ", "")
    if gk == "time" or pk == "time":
        gm, pm = _minutes(g), _minutes(p)
        return gm is not None and pm is not None and abs(gm - pm) < 1e-9
    if gk == "expr" and pk == "expr":
        if expr_equal(g.value, p.value, g.rounded, p.rounded):
            return True
        if g.percent != p.percent:  # 10% vs 0.1
            gv = g.value / 100 if g.percent else g.value
            pv = p.value / 100 if p.percent else p.value
            return expr_equal(gv, pv)
        return False
    if gk == "eq" and pk == "eq":
        return eq_equal(g.value, p.value)
    if gk == "eq" and pk == "expr":  # y = 2x + 1 vs 2x + 1; |AB| = 1 vs 1; sqrt(16) = 4 vs 4
        if None not in g.value and not any(x.free_symbols for x in g.value):
            return expr_equal(g.value[-1], p.value, None, p.rounded)
        return len(g.value) == 2 and None not in g.value and (_lone(g.value[0]) or _name_like(g.value[0])) \
            and expr_equal(g.value[1], p.value, None, p.rounded)
    if gk == "expr" and pk == "eq":  # 3 vs x = 3, or sqrt(4) = 2
        return p.value[-1] is not None and expr_equal(g.value, p.value[-1], g.rounded, None)
    if gk == "rel" and pk == "rel":
        if len(g.value) != len(p.value):  # x^2 < 4 vs -2 < x < 2: compare solution sets
            s1, s2 = _rel_to_interval(g.value), _rel_to_interval(p.value)
            return s1 is not None and s2 is not None and sets_equal(s1, s2)
        return rel_equal(g.value, p.value)
    if gk == "rel" and pk in ("interval", "seq") or pk == "rel" and gk in ("interval", "seq"):
        rel, iv = (g, p) if gk == "rel" else (p, g)
        if iv.kind == "seq":
            try:
                from .math_parse import _as_interval

                iv = _as_interval(iv)
            except ParseFailure:
                return False
        s = _rel_to_interval(rel.value)
        return s is not None and sets_equal(s, iv.value)
    if gk == "interval" and pk == "interval":
        return _intervals_equal(g.value, p.value)
    if {gk, pk} == {"interval", "seq"}:
        try:
            from .math_parse import _as_interval

            return _intervals_equal(_as_interval(g).value, _as_interval(p).value)
        except ParseFailure:
            return False
    if gk == "matrix" or pk == "matrix":
        return _matrix_equal(g, p)
    if gk in ("set", "seq") and pk in ("set", "seq"):
        gi, pi = g.value, p.value
        named_g, named_p = _lone_values(gi), _lone_values(pi)
        no_eq_p, no_eq_g = not any(x.kind == "eq" for x in pi), not any(x.kind == "eq" for x in gi)
        if named_g is not None and no_eq_p and pk == "seq" and p.bracket:  # x = 1, y = 2 vs (1, 2)
            return len(named_g) == len(pi) and all(equivalent(a, b) for a, b in zip(named_g, pi))
        if named_p is not None and no_eq_g and gk == "seq" and g.bracket:
            return len(named_p) == len(gi) and all(equivalent(a, b) for a, b in zip(gi, named_p))
        if gk == "set" and pk == "set" or (gk == "set" and not p.bracket) or (pk == "set" and not g.bracket):
            if all(a.kind == "eq" for a in gi) and not all(a.kind == "eq" for a in pi):
                gi = _lone_values(gi) or gi
            if all(a.kind == "eq" for a in pi) and not all(a.kind == "eq" for a in gi):
                pi = _lone_values(pi) or pi
            return _match_sets(gi, pi)
        if gk == "seq" and pk == "seq":
            if len(gi) != len(pi):
                return _both_systems(gi, pi) and systems_equal(gi, pi)
            if len(gi) == 2 and g.bracket != p.bracket and ":" not in (g.bracket + p.bracket):
                return False  # [a, b] vs (a, b): closed vs open interval
            if all(equivalent(a, b) for a, b in zip(gi, pi)):
                return True
            return _both_systems(gi, pi) and systems_equal(gi, pi)
        return _match_sets(gi, pi) if (gk == "set") == (pk == "set") else False
    if gk == "set" and pk in ("expr", "eq"):
        return len(g.value) == 1 and equivalent(g.value[0], p)
    if gk in ("seq", "set") and pk == "eq" and _both_systems(g.value, [p]):
        return systems_equal(g.value, [p])
    if pk in ("seq", "set") and gk == "eq" and _both_systems([g], p.value):
        return systems_equal([g], p.value)
    if gk == "seq" and pk == "expr" or gk == "expr" and pk in ("set", "seq"):
        return False
    _ = sp
    return False


def _intervals_equal(a, b) -> bool:
    import sympy as sp

    if a == b:
        return True
    if isinstance(a, sp.Interval) and isinstance(b, sp.Interval):
        return a.left_open == b.left_open and a.right_open == b.right_open and \
            expr_equal(a.start, b.start) and expr_equal(a.end, b.end)
    return sets_equal(a, b)


def _matrix_equal(g: Ans, p: Ans) -> bool:
    def cells(a: Ans):
        if a.kind == "matrix":
            rows = a.value
            return [c for r in rows for c in r], (len(rows), len(rows[0]))
        if a.kind == "seq":
            return list(a.value), None
        return None, None

    gc, gshape = cells(g)
    pc, pshape = cells(p)
    if gc is None or pc is None or len(gc) != len(pc):
        return False
    if gshape and pshape and gshape != pshape:
        return False
    if (gshape is None or pshape is None) and (gshape or pshape) and 1 not in (gshape or pshape):
        return False  # a list matches only a row or column matrix
    return all(equivalent(a, b) for a, b in zip(gc, pc))
