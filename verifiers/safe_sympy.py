"""Maths text to a sympy expression without trusting it: what the `math` verifier's parser (math_parse.py) evaluates.

    safe_sympify(text) -> sympy expression or relational, or ParseFailure

Model output is never handed to `eval` unchecked. `safe_sympify` accepts only a small alphabet, refuses dunder
names, attribute access and string literals, parses with a *whitelisted* namespace (no `sympify`, `plot`,
`preview`, builtins...), parses once unevaluated to refuse numbers too large to build (power towers, huge
factorials: MAX_BITS, MAX_EXPONENT, MAX_FACTORIAL), and only then evaluates.

Not here: turning an answer's text into a typed value (math_parse.py), comparing values (math_equiv.py).
"""
from __future__ import annotations

import re


class ParseFailure(ValueError):
    pass


MAX_FACTORIAL = 5000


def _guarded(fn):
    """factorial/gamma/binomial that refuse huge integer arguments before sympy computes them."""

    def call(*args, **kwargs):
        for a in args:
            if getattr(a, "is_number", False) and a.is_real:
                try:
                    if abs(a) > MAX_FACTORIAL:
                        raise ParseFailure(f"{fn.__name__} of a number above {MAX_FACTORIAL}")
                except TypeError:
                    pass
        return fn(*args, **kwargs)

    call.__name__ = fn.__name__
    return call

_ALLOWED = re.compile(r"^[A-Za-z0-9_+\-*/^().,=<>!|'\s%≈±]*$")
_sympy_ns: dict | None = None


def _namespace() -> dict:
    global _sympy_ns
    if _sympy_ns is None:
        import sympy as sp

        names = """Symbol Integer Float Rational Function pi E I oo zoo nan sqrt root cbrt exp log sin cos tan sec csc
        cot asin acos atan asec acsc acot sinh cosh tanh sech csch coth asinh acosh atanh acoth asech acsch
        factorial binomial gamma Abs Mod floor ceiling sign re im conjugate Max Min gcd lcm Add Mul Pow Number""".split()
        ns = {n: getattr(sp, n) for n in names}
        for n in ("factorial", "gamma", "binomial"):
            ns[n] = _guarded(getattr(sp, n))
        ns.update({"ln": sp.log, "arcsin": sp.asin, "arccos": sp.acos, "arctan": sp.atan, "arcsec": sp.asec,
                   "arccsc": sp.acsc, "arccot": sp.acot, "log10": lambda x: sp.log(x, 10), "abs": sp.Abs,
                   "Infinity": sp.oo, "infinity": sp.oo, "inf": sp.oo, "__builtins__": {}})
        _sympy_ns = ns
    return _sympy_ns


_PROTECTED = {"pi", "oo", "sqrt", "root", "cbrt", "exp", "log", "ln", "sin", "cos", "tan", "sec", "csc", "cot",
              "asin", "acos", "atan", "asec", "acsc", "acot", "sinh", "cosh", "tanh", "sech", "csch", "coth",
              "asinh", "acosh", "atanh", "arcsin", "arccos", "arctan", "arcsec", "arccsc", "arccot", "factorial",
              "binomial", "gamma", "abs", "Abs", "Mod", "floor", "ceiling", "log10", "ELLIPSIS", "DEGREE",
              "alpha", "beta", "theta", "phi", "lambda", "mu", "sigma", "omega", "delta", "epsilon", "rho", "tau",
              "psi", "chi", "eta", "zeta", "kappa", "nu", "xi", "Max", "Min", "gcd", "lcm", "EmptySet", "inf"}
_MAY_EXPLODE = re.compile(r"\*\*|\^|!|exp|factorial|gamma|binomial|(?<![A-Za-z])e(?![A-Za-z])")
MAX_BITS = 100_000  # refuse exact numbers larger than this many bits
MAX_EXPONENT = 100_000  # and any power with a larger exponent, even of a variable


def _check_size(expr) -> None:
    """Walk an unevaluated tree; refuse powers and factorials whose exact value would be huge."""
    import sympy as sp

    for node in sp.postorder_traversal(expr):  # inner first: a tower is refused before its top is evaluated
        if isinstance(node, sp.exp) or (isinstance(node, sp.Pow) and node.args[0] == sp.E):
            arg = node.args[-1]
            if arg.is_number:
                try:
                    if abs(complex(sp.N(arg, 15))) > MAX_BITS:
                        raise ParseFailure("number too large to compare exactly")
                except (TypeError, ValueError, OverflowError):
                    raise ParseFailure("number too large to compare exactly") from None
        if isinstance(node, sp.Pow):
            b, e = node.args
            if e.is_number:
                try:
                    if abs(complex(sp.N(e, 15))) > MAX_EXPONENT:
                        raise ParseFailure(f"exponent above {MAX_EXPONENT}")
                except (TypeError, ValueError, OverflowError):
                    raise ParseFailure("exponent too large") from None
            try:
                if e.is_number and b.is_number:
                    ev = abs(complex(sp.N(e, 15)))
                    bv = sp.N(sp.Abs(b), 15)
                    if bv != 0 and bv != 1 and ev * abs(float(sp.log(bv, 2).evalf(15))) > MAX_BITS:
                        raise ParseFailure("number too large to compare exactly")
            except (TypeError, ValueError, OverflowError):
                raise ParseFailure("number too large to compare exactly") from None
        elif isinstance(node, (sp.factorial, sp.gamma)) and node.args[0].is_number:
            try:
                if abs(complex(sp.N(node.args[0], 15))) > 5000:
                    raise ParseFailure("factorial too large to compare exactly")
            except (TypeError, ValueError, OverflowError):
                raise ParseFailure("factorial too large") from None


def safe_sympify(text: str):
    """Plain maths text -> sympy expression/relational, or ParseFailure."""
    import warnings

    import sympy as sp
    from sympy.utilities.exceptions import SymPyDeprecationWarning
    from sympy.parsing.sympy_parser import (auto_number, auto_symbol, convert_xor, factorial_notation,
                                            function_exponentiation, implicit_application, implicit_multiplication,
                                            parse_expr, rationalize, repeated_decimals, split_symbols_custom)

    t = text.strip()
    if not t or len(t) > 1500:
        raise ParseFailure("empty or too long")
    if not _ALLOWED.match(t) or "__" in t or re.search(r"\.\s*[A-Za-z_]", t) or "lambda" in t.split():
        raise ParseFailure(f"characters or names outside the maths alphabet in {t[:60]!r}")
    if t.count("(") != t.count(")"):
        raise ParseFailure("unbalanced parentheses")
    t = re.sub(r"\|([^|]+)\|", r"(Abs(\1))", t)
    t = t.replace("^", "**").replace("≈", "==")
    t = re.sub(r"(\d)\s*E\s*([-+]?\d)", r"\1e\2", t)  # 5.1E-2

    def can_split(name: str) -> bool:
        return name not in _PROTECTED and name.isalpha() and len(name) <= 4 and not name.startswith("ELL")

    trans = (auto_number, repeated_decimals, auto_symbol, factorial_notation, rationalize, convert_xor,
             split_symbols_custom(can_split), implicit_multiplication, implicit_application, function_exponentiation)
    ns = dict(_namespace())
    # f, g, h applied to something are unknown functions (compared by substituting random concrete ones)
    local = {n: sp.Function(n) for n in ("f", "g", "h") if re.search(rf"(?<![A-Za-z]){n}\s*\(", t)}
    local.update({"e": sp.E, "i": sp.I, "DEGREE": sp.pi / 180})  # e, i: Euler's number and the imaginary unit
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", SymPyDeprecationWarning)  # e.g. a tuple multiplied: not maths
            if _MAY_EXPLODE.search(t):  # only powers, factorials and exponentials can build huge numbers
                raw = parse_expr(t, local_dict=dict(local), global_dict=ns, transformations=trans, evaluate=False)
                _check_size(raw)
            expr = parse_expr(t, local_dict=dict(local), global_dict=ns, transformations=trans, evaluate=True)
    except ParseFailure:
        raise
    except SymPyDeprecationWarning as e:
        raise ParseFailure(f"cannot parse {t[:60]!r}: {str(e).strip().splitlines()[0][:80]}") from None
    except MemoryError:
        raise  # the runtime reports it as ERROR: the verifier's failure, not the model's
    except Exception as e:  # noqa: BLE001 - sympy's parser raises many types (TokenError, ...): all mean "not maths"
        raise ParseFailure(f"cannot parse {t[:60]!r}: {type(e).__name__}") from None
    except sp.SympifyError as e:
        raise ParseFailure(f"cannot parse {t[:60]!r}: {e}") from None
    if isinstance(expr, (tuple, list)) or not isinstance(expr, sp.Basic):
        raise ParseFailure(f"not a single expression: {t[:60]!r}")
    return expr
