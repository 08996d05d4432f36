"""LaTeX and prose to a plain-text maths string that `math_parse` can read.

Handles: `$`/`\\(`/`\\[` delimiters, `\\left`/`\\right`, spacing commands, `\\frac`
(`\\dfrac`, `\\tfrac`, `\\frac12`), `\\sqrt[n]{}`, `^{}`/`_{}`, `\\cdot`/`\\times`/`\\div`,
`\\pi`, `\\infty`, `\\text{}` and friends, trig/log names, `\\binom`, `\\bmod`, `|x|`,
`\\le`/`\\ge`/`\\neq`, `\\{ \\}`, `\\cup`, degrees, currency, percent, thousands
separators. Matrix environments are left for the parser (`split_matrix`).

What it returns is a string; nothing is evaluated here. Standard library only.
"""
from __future__ import annotations

import re

from .math_extract import MATH_WORDS, braced

_DROP = [r"\\displaystyle", r"\\left", r"\\right", r"\\bigl", r"\\bigr", r"\\Bigl", r"\\Bigr", r"\\big", r"\\Big",
         r"\\!", r"\\,", r"\\;", r"\\:", r"\\quad", r"\\qquad", r"\\limits", r"\\mathop", r"\\operatorname"]
_FUNCS = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsec": "asec", "arccsc": "acsc", "arccot": "acot",
          "ln": "log", "lg": "log10"}
_SIMPLE = {r"\cdot": "*", r"\times": "*", r"\ast": "*", r"\div": "/", r"\pi": "pi", r"\infty": "oo", r"\infin": "oo",
           r"\leq": "<=", r"\le": "<=", r"\geq": ">=", r"\ge": ">=", r"\neq": "!=", r"\ne": "!=", r"\lt": "<",
           r"\gt": ">", r"\leqslant": "<=", r"\geqslant": ">=", r"\cup": " U ", r"\ldots": "ELLIPSIS",
           r"\cdots": "ELLIPSIS", r"\dots": "ELLIPSIS", r"\emptyset": "EmptySet", r"\varnothing": "EmptySet",
           r"\bmod": "%", r"\mod": "%", r"\approx": "≈", r"\to": " → ", r"\rightarrow": " → ", r"\mid": "|",
           r"\colon": ":", r"\in": " in ", r"\%": "%", r"\$": "", r"\vert": "|", r"\lvert": "|", r"\rvert": "|",
           r"\{": "⟦", r"\}": "⟧", r"\pm": "±", r"\lbrace": "{", r"\rbrace": "}", r"\lbrack": "[", r"\rbrack": "]"}
# one alternation for all simple commands, longest first; a word command must not run into letters
_SIMPLE_RE = re.compile("|".join(re.escape(k) + (r"(?![A-Za-z])" if k[-1].isalpha() else "")
                                 for k in sorted(_SIMPLE, key=len, reverse=True)))
_SIMPLE_REP = {k: (f" {v} " if v[:1].isalpha() else v) for k, v in _SIMPLE.items()}  # "i\pi" -> "i pi "
_TEXTLIKE = re.compile(r"\\(?:text|textbf|textit|textrm|texttt|mathrm|mathbf|mathit|mathsf|mathtt|mbox|boldsymbol|"
                       r"mathbb|mathcal|hbox|textnormal|operatorname\*?)\s*\{")


def _replace_group_cmd(s: str, pattern: re.Pattern, fn) -> str:
    """Replace `\\cmd{arg}` (one brace group) by fn(arg), innermost-safe by rescanning."""
    for _ in range(200):
        m = pattern.search(s)
        if not m:
            return s
        got = braced(s, m.end() - 1)
        if got is None:
            return s[:m.start()] + s[m.end():]
        arg, end = got
        s = s[:m.start()] + fn(arg) + s[end:]
    return s


def _frac(s: str) -> str:
    s = re.sub(r"\\[dtc]?frac\s*(\d)\s*(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\[dtc]?frac\s*(\d)\s*\{", r"\\frac{\1}{", s)
    s = re.sub(r"\\[dtc]?frac\s*\{", r"\\frac{", s)
    s = re.sub(r"\\frac\s*([A-Za-z0-9])\s*([A-Za-z0-9])", r"\\frac{\1}{\2}", s)
    for _ in range(200):
        i = s.find("\\frac{")
        if i < 0:
            break
        num = braced(s, i + 5)
        if num is None:
            break
        rest = s[num[1]:].lstrip()
        off = len(s) - len(rest)
        if rest.startswith("{"):
            den = braced(s, off)
            if den is None:
                break
            s = s[:i] + f"(({num[0]})/({den[0]}))" + s[den[1]:]
        elif rest[:1].isalnum():
            s = s[:i] + f"(({num[0]})/({rest[0]}))" + s[off + 1:]
        else:
            break
    return s


def _sqrt(s: str) -> str:
    for _ in range(200):
        m = re.search(r"\\sqrt\s*\[([^\[\]]+)\]\s*\{", s)
        if not m:
            break
        got = braced(s, m.end() - 1)
        if got is None:
            break
        s = s[:m.start()] + f"(({got[0]})**(1/({m.group(1)})))" + s[got[1]:]
    s = _replace_group_cmd(s, re.compile(r"\\sqrt\s*\{"), lambda a: f"sqrt({a})")
    s = re.sub(r"\\sqrt\s*(\d+|[A-Za-z])", r"sqrt(\1)", s)
    return s.replace("\\sqrt", "sqrt")


def latex_to_text(s: str) -> str:
    """A plain maths string from LaTeX (or from plain text, which passes through mostly unchanged)."""
    s = s.strip()
    s = re.sub(r"^\$+|\$+$", "", s).strip()
    s = re.sub(r"^\\\(|\\\)$", "", s).strip()
    s = re.sub(r"^\\\[|\\\]$", "", s).strip()
    s = s.replace("\\$", "").replace("$", " ").replace("\\ ", " ")
    s = s.replace("\\\\", "\\") if "\\\\" in s and "\\begin" not in s else s  # over-escaped "\\\\frac"
    for d in _DROP:
        s = re.sub(d + r"(?![A-Za-z])", " ", s)
    s = re.sub(r"\\(?:[dt]frac)", r"\\frac", s)
    s = _replace_group_cmd(s, _TEXTLIKE, lambda a: f" {a} ")
    s = re.sub(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ|°|\\degree", " DEGREE ", s)
    s = _replace_group_cmd(s, re.compile(r"\\binom\s*\{"), lambda a: f"BINOMA({a})")
    s = re.sub(r"BINOMA\(([^()]*)\)\s*\{([^{}]*)\}", r"binomial(\1, \2)", s)
    s = _frac(s)
    s = _sqrt(s)
    s = re.sub(r"\\log_\s*\{([^{}]*)\}\s*\(([^()]*)\)", r"log(\2, \1)", s)
    s = re.sub(r"\\log_\s*(\w)\s*\(([^()]*)\)", r"log(\2, \1)", s)
    s = re.sub(r"\\log_\s*\{([^{}]*)\}\s*(\w+)", r"log(\2, \1)", s)
    s = re.sub(r"\\log_\s*(\w)\s*(\w+)", r"log(\2, \1)", s)
    if "\\" in s:
        s = _SIMPLE_RE.sub(lambda m: _SIMPLE_REP[m.group(0)], s)
    s = re.sub(r"\\(arcsin|arccos|arctan|arcsec|arccsc|arccot|ln|lg)(?![A-Za-z])", lambda m: _FUNCS[m.group(1)], s)
    s = re.sub(r"\\([A-Za-z]+)", r" \1 ", s)  # \sin -> sin, \alpha -> alpha, \mathrm-less leftovers
    s = re.sub(r"(?<![A-Za-z])(arcsin|arccos|arctan|arcsec|arccsc|arccot|ln)(?![A-Za-z])",
               lambda m: _FUNCS[m.group(1)], s)
    s = _bare_arguments(s)
    s = re.sub(r"_\s*\{\s*([A-Za-z0-9]+)\s*\}", r"_\1", s)  # x_{1} -> x_1
    if s.startswith("{") and s.endswith("}") and _one_group(s) and "," in s:
        s = "⟦" + s[1:-1] + "⟧"  # a plain-text set {1, 2}: keep its braces
    s = s.replace("{", "(").replace("}", ")").replace("⟦", "{").replace("⟧", "}")
    s = re.sub(r"\s+", " ", s).strip()
    return s


_FN = r"(?:a?(?:sin|cos|tan|sec|csc|cot)h?|log)"
_ATOM = r"(?:\d+(?:\.\d+)?|pi|DEGREE|theta|alpha|beta|gamma|phi|[A-Za-z])(?![A-Za-z0-9(])"
_BARE_ARGUMENT = re.compile(rf"(?<![A-Za-z])({_FN})(\s*\^\s*(?:\d+|\(\s*-?\d+\s*\)))?\s+((?:{_ATOM}\s*)+)")


def _bare_arguments(s: str) -> str:
    """A function's argument written without parentheses, parenthesised: it runs over the product of numbers and
    single-letter names that follows, and stops at the next function, operator or bracket.
    'sin 2x' -> 'sin(2x)', '2 sin x cos x' -> '2 sin(x) cos(x)' (not sin(x cos(x))), 'sin 60 DEGREE' ->
    'sin(60 DEGREE)', 'sin^2 x' -> 'sin^2(x)'."""
    return _BARE_ARGUMENT.sub(lambda m: f"{m.group(1)}{(m.group(2) or '').strip()}({m.group(3).strip()}) ", s)


def _one_group(s: str) -> bool:
    got = braced(s, 0)
    return got is not None and got[1] == len(s)


_THOUSANDS = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")


def strip_number_format(s: str) -> str:
    """'7,425,000' -> '7425000', '11,\\! 111' -> '11111', '1 000' -> '1000' (thousands separators only)."""
    t = s.replace("\\!", "").replace("{,}", ",")
    compact = re.sub(r"(?<=\d),\s+(?=\d{3}(?:\D|$))", ",", t) if "\\!" in s else t
    if _THOUSANDS.match(compact.strip()):
        return compact.replace(",", "").strip()
    if re.fullmatch(r"[-+]?\d{1,3}(?: \d{3})+(?:\.\d+)?", t.strip()):
        return t.replace(" ", "").strip()
    return s


_UNIT_WORDS = re.compile(r"^\s*(?:square|sq\.?|cubic|cu\.?)?\s*[A-Za-z][A-Za-z.]*(?:\s+[A-Za-z][A-Za-z.]*){0,3}"
                         r"(?:\s*(?:\^|\*\*)\s*\(?\s*[23]\s*\)?)?\s*\.?\s*$")


_NOT_UNITS = frozenset(w for w in MATH_WORDS if w not in {"text", "mathrm", "deg", "circ"}) | {"oo", "e", "i"}


def strip_units(s: str) -> str:
    """'10 square units' -> '10', '10 cm^2' -> '10', '\\$10' -> '10' (a number followed by words only)."""
    t = s.strip()
    t = re.sub(r"^(?:\\\$|\$|USD|US\$|€|£)\s*", "", t)
    m = re.match(r"^([-+]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:\s*(?:\*|x)\s*10\s*(?:\^|\*\*)\s*\(?[-+]?\d+\)?)?)\s*(.*)$", t)
    if m and m.group(2) and _UNIT_WORDS.match(m.group(2)) and not re.fullmatch(r"\s*[A-Za-z]\s*", m.group(2)) \
            and not any(w.lower() in _NOT_UNITS or len(w) == 1 for w in re.findall(r"[A-Za-z]+", m.group(2))):
        return m.group(1)
    return t
