"""Is a predicted answer equivalent to the gold one? (the `math` verifier's judgement)

Numbers and expressions: `math_numeric.expr_equal` (evaluation at shared points, exact
rationals). Equations match when they are the same equation (one side a lone variable or
function and the other sides equal), or when (L1 - R1) and (L2 - R2), or their numerators,
are proportional. Inequalities in one variable compare their solution sets; in several,
proportional with the right sign. Sets ignore order and duplicates; tuples and lists don't;
an unbracketed list is a set; small polynomial systems compare their solutions.
"""
from __future__ import annotations

from .math_numeric import _proportional, expr_equal
from .math_parse import Ans, ParseFailure

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


def _assignments(items: list[Ans]) -> dict[str, Ans] | None:
    """{name: value} when every item assigns a distinct lone variable (x = 2, y = 3), else None."""
    values = _lone_values(items)
    if values is None or len(items) < 2:
        return None
    names = [str(a.value[0]) for a in items]
    return dict(zip(names, values)) if len(set(names)) == len(names) else None


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
        named = _assignments(gi), _assignments(pi)
        if None not in named:  # x = 2, y = 3 vs x = 3, y = 2: each variable's own value, by name
            return named[0].keys() == named[1].keys() and all(equivalent(named[0][k], named[1][k]) for k in named[0])
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
