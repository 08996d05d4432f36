"""Find the final answer in a model's full output (the `math` verifier's first step).

Order of trust, first hit wins (the second value returned names the path taken, and the
`math` verifier puts it in every verdict's detail, so a pass found by a fallback is visible):
  1. `\\boxed{...}` / `\\fbox{...}`: all boxed answers must agree (after whitespace
     normalisation); several *different* boxed answers is a hedge and yields no answer.
  2. `<answer>...</answer>` (the last one).
  3. `#### X` (GSM8K's marker; the last one), then a line that starts `A: X` (the last one).
  4. "final answer: X", "the answer is X", "answer: X" (the last such phrase).
  5. A bold `**X**` on one of the last two lines, when X is short and not prose.
  6. For short outputs (one line, no sentence): the whole output.
  7. Otherwise the last math span (`$...$`, `\\[...\\]`, `[...]`) or, failing that, the closing
     statement (the last sentence with a number), read as an answer only where it states one:
     an amount of money ("... has $8 left." -> 8, path "currency"), "... is 15." at its end (path
     "closing statement"), an arithmetic expression that ends it ("... has 9 - 5 shells.", path "closing
     expression", a fallback), else its last number (path "last number", a fallback). A closing
     statement that rejects a candidate ("So x = 3 is not a solution.") gives no answer.

Prose with money is not maths: a `$...$` span whose content reads as a sentence ("$2 per egg
and has 9 left, so $") is not taken for a math span. Calculator annotations (`<<2*9=18>>`,
GSM8K's) are removed before anything else.

Hedges are refused here, before any maths: "A or B or C" enumerations in the answer
slot, and answers longer than `MAX_ANSWER_CHARS`. Only the last `TAIL_CHARS` of an
output are searched, so a 1 MB output costs no more than a short one.
Standard library only.
"""
from __future__ import annotations

import functools
import re

TAIL_CHARS = 4000
MAX_ANSWER_CHARS = 1500
# the paths on which the output itself says "this is my answer" (1-5 above); the others are fallbacks that read an
# answer into an output that states none
STATED_PATHS = frozenset({"boxed", "equal boxes", "answer tag", "#### marker", "A: line", "answer phrase", "bold",
                          "currency", "closing statement"})

_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)
_PHRASE = re.compile(
    r"(?:final\s+answer|the\s+answer|answer|solution|result|réponse|respuesta|resposta|antwort|risposta|ответ|答案)"
    r"\s*(?:\((?:[^()]{0,20})\))?\s*(?:is|=|:|：|equals|est|es|ist|是|為|为)\s*[:=]?\s*",
    re.I)
_NOISE = re.compile(r"<\|[^|>]{1,40}\|>(?:(?!<\|).)*$|\s*I hope it is correct\.?", re.S | re.I)
_MATH_SPANS = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\[(.+?)\\\]|\\\((.+?)\\\)|\[([^\[\]\n]{1,200})\]", re.S)
# a number: a repeating decimal first (0.(3), 0.333...: math_parse reads both), then plain ones and a/b
_NUMBER = re.compile(r"-?\d+\.\d*\(\d+\)|-?\d+\.\d+(?:\.\.\.|…)|-?\d[\d,]*(?:\.\d+)?(?:/\d+)?")
_CALC = re.compile(r"<<[^<>\n]{0,200}>>")
_HASHES = re.compile(r"####\s*([^\n]+)")
_A_LINE = re.compile(r"(?:^|\n)[ \t]*(?:\*\*)?A(?:\*\*)?[ \t]*:[ \t]*([^\n]+)")
_BOLD = re.compile(r"\*\*([^*\n]{1,80})\*\*")
_BOLD_ANSWER = re.compile(r"[-+]?\$?\s*-?\d[\d,]*(?:\.\d+)?(?:\s*/\s*\d+)?\s*%?")  # a bare number
# "the initial answer is correct": a phrase that judges an answer rather than giving one
_VERDICT_WORD = re.compile(r"(?:not\s+)?(?:correct|incorrect|right|wrong|true|false|valid|invalid)\b", re.I)
_HEDGE = re.compile(r"(?:^|\s|\$)(?:or|and/or)(?:\s|\$|$)", re.I)


def braced(s: str, open_idx: int) -> tuple[str, int] | None:
    """Content of the brace group whose '{' is at open_idx, and the index after its '}'."""
    depth = 0
    for k in range(open_idx, len(s)):
        c = s[k]
        if c == "\\" and k + 1 < len(s) and s[k + 1] in "{}":
            continue
        if c == "{" and (k == 0 or s[k - 1] != "\\"):
            depth += 1
        elif c == "}" and (k == 0 or s[k - 1] != "\\"):
            depth -= 1
            if depth == 0:
                return s[open_idx + 1:k], k + 1
    return None


def boxed_answers(s: str, last: int = 20) -> list[str]:
    """Contents of the last `last` boxes; a box whose braces do not close within 4*MAX_ANSWER_CHARS
    characters is skipped (its content would be refused as too long anyway)."""
    out = []
    starts = [m.end() - 1 for m in _BOX.finditer(s)][-last:]
    for k in starts:
        got = braced(s[:k + 4 * MAX_ANSWER_CHARS + 2], k)
        if got is not None:
            out.append(got[0].strip())
        else:
            out.append(s[k + 1:k + 4 * MAX_ANSWER_CHARS + 2])  # unclosed or huge: kept, so it counts as an answer
    return out


# a box that holds a blank to fill, not an answer: nothing, \phantom{..}, \quad, ?, \square, underscores
_PLACEHOLDER = re.compile(r"(?:\\(?:h|v)?phantom\{[^{}]*\}|\\q?quad|\\[,;:! ]|\\hspace\{[^{}]*\}|\\square|\\Box|"
                          r"\\blacksquare|\\_|_|\?|~|\\underline\{\s*\}|\\text\{\s*\}|\s)*")


def is_placeholder(box: str) -> bool:
    """A box's content that is a blank to fill (a problem's `\\boxed{\\phantom{2}}`, `\\boxed{}`, `\\boxed{?}`)."""
    return bool(_PLACEHOLDER.fullmatch(box))


def distinct_boxes(s: str) -> list[str]:
    """The boxed answers of s, duplicates (up to whitespace) and placeholders (a blank to fill, as a problem
    writes one) removed, in order."""
    seen, out = set(), []
    for b in boxed_answers(s):
        k = _norm_ws(b)
        if b and k not in seen and not is_placeholder(b):
            seen.add(k)
            out.append(b)
    return out


def unbox_restated(output: str, prompt: str) -> str:
    """The output with each box that restates a box of the prompt (`\\boxed{x+1}` copied from the question) opened
    into its content: a question's box is not the model's answer."""
    asked = {_norm_ws(b) for b in boxed_answers(prompt) if not is_placeholder(b)}
    if not asked:
        return output
    out, last = [], 0
    for m in _BOX.finditer(output):
        got = braced(output, m.end() - 1)
        if got is not None and _norm_ws(got[0]) in asked:
            out.append(output[last:m.start()] + f"({got[0]})")
            last = got[1]
    return "".join(out) + output[last:]


def _norm_ws(s: str) -> str:
    return re.sub(r"\s+", "", s)


def _clean_tail(s: str) -> str:
    s = s.replace("**", " ").strip()  # markdown bold
    return s.rstrip(".;!").strip()


def extract_answer(text: str) -> tuple[str | None, str]:
    """(answer, how) from a model output; answer None when there is none to trust (an empty box read as the answer
    is none: `\\boxed{}` is a blank to fill)."""
    answer, how = _extract(text)
    if answer is not None and _BOX.search(answer) and all(is_placeholder(b) for b in boxed_answers(answer)):
        return None, "an empty \\boxed{} (a blank to fill, not an answer)"
    return answer, how


def _extract(text: str) -> tuple[str | None, str]:
    if text is None:
        return None, "no output"
    full = str(text)
    s = full[-TAIL_CHARS:] if len(full) > TAIL_CHARS else full
    s = _CALC.sub("", _NOISE.sub("", s)).strip()
    if not s:
        return None, "empty output" if not full.strip() else "nothing but special tokens and what follows them"
    boxes = distinct_boxes(full)  # over the whole text: a long boxed answer must not be cut in half
    if boxes:
        if len(boxes) > 1:
            return None, f"{len(boxes)} different boxed answers"
        return boxes[-1], "boxed"
    tags = _ANSWER_TAG.findall(s)
    if tags:
        return tags[-1].strip() or None, "answer tag"
    for marker, how in ((_HASHES, "#### marker"), (_A_LINE, "A: line")):
        found = marker.findall(s)
        if found:
            answer = _marker_answer(found[-1])
            if answer:
                return answer, how
    phrases = [m for m in _PHRASE.finditer(s) if not _VERDICT_WORD.match(s, m.end())]
    if phrases:
        rest = s[phrases[-1].end():]
        line = rest.split("\n", 1)[0].strip() or rest.strip().split("\n", 1)[0].strip()
        m = _MATH_SPANS.match(line)
        if m:
            line = _span_content(m)
        line = _clean_tail(line)
        # "is 90 degrees." / "is $x$, as shown": keep up to a sentence break that follows the answer
        line = re.split(r"(?<=[\d\w}\)\]])[,.;]\s+(?=[A-Za-z]{3,})", line)[0].strip()
        if line and looks_like_prose(line):  # "The volume of $V$ is 120": look inside the sentence
            inner = re.findall(r"\b(?:is|are|equals|=)\s+(.+?)\s*$", line)
            spans = list(_MATH_SPANS.finditer(line))
            nums = _NUMBER.findall(line.replace("$", " "))
            if inner and not looks_like_prose(inner[-1]):
                line = _clean_tail(inner[-1])
            elif spans:
                line = _span_content(spans[-1]).strip()
            elif len(nums) == 1 and not re.search(r"[=+*/^]", line):  # "The final answer is Tom buys 10 apples"
                line = nums[0].rstrip(",")
        if line:
            return line, "answer phrase"
    tail = "\n".join([ln for ln in s.splitlines() if ln.strip()][-2:])
    bold = [b.strip() for b in _BOLD.findall(tail) if _BOLD_ANSWER.fullmatch(b.strip()) or "\\" in b]
    if bold:
        return _clean_tail(bold[-1]), "bold"
    sentence = closing_statement(s)
    if sentence and looks_like_prose(sentence) and _REJECTS.search(_span_text(sentence)):
        return None, "closing statement rejects a candidate"  # "So x = 14 and y = 15 is not a solution."
    predicate = _PREDICATE.search(sentence) if sentence else None
    if predicate and looks_like_prose(_span_text(sentence)):  # "the degree of \((...)\) is 15.": the predicate
        return predicate.group(1), "closing statement"
    spans = _math_spans(s)
    last = _span_content(spans[-1]).strip().rstrip(".,;").strip() if spans else None  # a closing full stop, not "!"
    worded = spans and (s[:spans[0].start()].strip() or re.search(r"[A-Za-z]{2}", _MATH_SPANS.sub(" ", s)))
    if worded and re.search(r"\$|\\\(|\\\[", s):
        return last, "last math span"  # "Answer $9$", "$f(-2)$ is equal to $15$.": the maths, not the words
    if "\n" not in s and len(s) <= MAX_ANSWER_CHARS and not looks_like_prose(s):
        return s, "whole output"
    if spans:
        return last, "last math span"
    return closing_answer(s)


_REJECTS = re.compile(r"\b(?:not|no|never|cannot|neither|nor|fails?|isn't|aren't|doesn't|don't|wasn't|won't)\b",
                      re.I)
_CURRENCY = re.compile(r"(?<![\w$])\$\s?(-?\d[\d,]*(?:\.\d+)?)")
_IS_NUMBER = re.compile(r"\b(?:is|are|was|were|equals)\s+\$?\s?(-?\d[\d,]*(?:\.\d+)?(?:/\d+)?)\s*(?:[%°]|[A-Za-z]+)?"
                        r"\s*[.!]?\s*$")
# "... is 15." / "... is \\(-3\\)." / "... equals $7$.": a number that closes the statement after its verb
_PREDICATE = re.compile(r"\b(?:is|are|was|were|equals)\s+(?:\$|\\\()?\s*(-?\d[\d,]*(?:\.\d+)?(?:/\d+)?)\s*"
                        r"(?:\$|\\\))?\s*(?:[%°]|[A-Za-z]+)?\s*[.!]?\s*$")
_CLOSING_EXPRESSION = re.compile(r"(?<![\w.])(-?\d+(?:\.\d+)?(?:\s*[-+*/×÷]\s*\d+(?:\.\d+)?)+)(?:\s+[A-Za-z]+)?\s*[.!]?\s*$")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


@functools.lru_cache(maxsize=256)
def closing_statement(s: str) -> str:
    """The output's closing statement: the last sentence, on the last line with a number, that has a number."""
    for line in reversed(s.splitlines()):
        sentences = [x for x in _SENTENCE_BREAK.split(line.strip()) if _NUMBER.search(x.replace("$", " "))]
        if sentences:
            return sentences[-1]
    return ""


def closing_answer(s: str) -> tuple[str | None, str]:
    """The answer the closing statement states (an amount of money, "... is N." at its end), else its last number
    (a fallback); none when the statement rejects a candidate ("x = 3 is not a solution")."""
    sentence = closing_statement(s)
    if not sentence:
        return None, "no answer found"
    if looks_like_prose(sentence) and _REJECTS.search(sentence):
        return None, "closing statement rejects a candidate"
    money = _CURRENCY.findall(sentence)
    if money:
        return money[-1], "currency"
    m = _IS_NUMBER.search(sentence)
    if m and looks_like_prose(sentence):
        return m.group(1), "closing statement"
    expr = _CLOSING_EXPRESSION.search(sentence)
    if expr and "=" not in sentence:  # "Priya has 9 - 5 shells.": the expression, not its last operand
        return re.sub(r"\s+", " ", expr.group(1)).strip(), "closing expression"
    return _NUMBER.findall(sentence.replace("$", " "))[-1].rstrip(","), "last number"  # "= 63, which is" -> 63


def _span_content(m) -> str:
    """What a `_MATH_SPANS` match (or a `Span`) holds between its delimiters (`$...$`, `\\[...\\]`, `[...]`)."""
    if isinstance(m, Span):
        return m.content
    return next(g for g in m.groups() if g is not None)


def _span_text(sentence: str) -> str:
    """A sentence with its math spans' delimiters taken out (their content kept): what its words say."""
    return re.sub(r"\$|\\[()\[\]]", " ", sentence)


class Span:
    """A math span found by `_math_spans`: where it is and what it holds (the interface of a match it needs)."""

    def __init__(self, start: int, end: int, content: str) -> None:
        self._start, self._end, self.content = start, end, content

    def start(self) -> int:
        return self._start

    def end(self) -> int:
        return self._end


_OPERATOR_EDGE = re.compile(r"^\s*[-+*/=×÷]|[-+*/=×÷]\s*$")


def _dollar_ok(content: str) -> bool:
    """Whether the text between two `$` is maths and not what lies between two amounts of money: not empty, on one
    line, not prose ("$2 per egg ... makes $"), not cut at an operator ("$32 - $24": `32 - `)."""
    return bool(content.strip()) and "\n" not in content and ("\\" in content or not looks_like_prose(content)) \
        and not _OPERATOR_EDGE.search(content)


def _math_spans(s: str) -> list:
    """Math spans: `$$...$$`, `\\[...\\]`, `\\(...\\)`, `[...]`, and `$...$` pairs where the text between reads as
    maths. A `$` that opens something else is an amount of money: the next `$` is tried as the opening one
    ("$32 - $24 = $8 ... has $8 left" holds no maths; "$5 + 3 = 8$" is one span)."""
    spans = [m for m in _MATH_SPANS.finditer(s) if m.group(2) is None]
    taken = [(m.start(), m.end()) for m in spans]
    dollars = [m.start() for m in re.finditer(r"(?<![\\$])\$(?!\$)", s)
               if not any(a <= m.start() < b for a, b in taken)]
    i = 0
    while i + 1 < len(dollars):
        a, b = dollars[i], dollars[i + 1]
        if _dollar_ok(s[a + 1:b]):
            spans.append(Span(a, b + 1, s[a + 1:b]))
            i += 2
        else:
            i += 1  # the opening `$` was money: try the next one
    return sorted(spans, key=lambda m: m.start())


def _marker_answer(text: str) -> str:
    """The answer after a `####` or `A:` marker: the maths in it if it is a sentence, else the text."""
    line = _clean_tail(text.strip())
    if looks_like_prose(line):
        nums = _NUMBER.findall(line.replace("$", " "))
        return nums[-1] if nums else ""
    m = _MATH_SPANS.fullmatch(line)
    return _span_content(m).strip() if m else line


_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{3,}|[^\W\d_A-Za-z]{2,}")
MATH_WORDS = frozenset("""sin cos tan sec csc cot sinh cosh tanh sech csch coth arcsin arccos arctan arcsec arccsc arccot
asin acos atan asec acsc acot asinh acosh atanh log exp sqrt abs mod pmod bmod lim sum max min gcd lcm det
frac dfrac tfrac text mathrm infty inf pi deg cdot times div neq leq geq left right begin end pmatrix bmatrix
matrix vmatrix cup cap emptyset circ""".split())


def looks_like_prose(s: str) -> bool:
    """Two or more English-looking words (3+ letters, not maths names or LaTeX commands)."""
    words = [w for w in _WORD.findall(s) if w.lower() not in MATH_WORDS]
    return sum(1 if w.isascii() else max(1, len(w) // 2) for w in words) >= 2


def is_hedge(answer: str) -> bool:
    """'A or B or C' style enumerations: the model is listing options, not answering."""
    return bool(_HEDGE.search(answer.replace("\\text{or}", " or ")))


_LETTER = re.compile(r"(?<![A-Za-z])\(?([A-J])\)?(?![A-Za-z])")


def extract_choice(text: str) -> tuple[str | None, str]:
    """The chosen letter (A-J) of a multiple-choice answer, or None.

    Boxed letter, then the first letter of the answer phrase's first clause, then a leading letter
    ("D. because ..."), then a lone letter. Two letters in that clause ("A or B") are a hedge: None.
    """
    s = _NOISE.sub("", str(text or "")[-TAIL_CHARS:]).strip()
    s = re.sub(r"\\(?:text|textbf|textrm|mathrm|mathbf)\s*\{([^{}]*)\}", r"\1", s).replace("$", " ").strip()
    boxes = distinct_boxes(s)
    if boxes:
        letters = {m.group(1) for b in boxes for m in _LETTER.finditer(b.replace("\\text", " "))}
        return (letters.pop(), "boxed letter") if len(letters) == 1 else (None, "boxed letters disagree")
    phrases = list(_PHRASE.finditer(s)) or list(re.finditer(r"(?:answer|réponse|答案)\s*(?:is|est|是)?\s*", s, re.I))
    if phrases:
        clause = re.split(r"[,;\n]|\.\s", s[phrases[-1].end():], maxsplit=1)[0]
        found = {m.group(1) for m in _LETTER.finditer(clause)}
        if len(found) == 1:
            return found.pop(), "answer phrase letter"
        if len(found) > 1:
            return None, "several letters in the answer"
    m = re.match(r"\(?([A-J])\)?(?:[.:)。]|\s*$|[^\x00-\x7f])", s) or re.fullmatch(r"\s*\(?([A-J])\)?\s*", s)
    if m:
        return m.group(1), "leading letter"
    return None, "no choice letter"


def _math_text(text: str) -> str:
    """Text as compared for a restatement: no whitespace, no `$`, no `\\left`/`\\right` or thin spaces, no closing
    "=" or full stop."""
    text = re.sub(r"\\(?:left|right)\b|\\[,;:! ]|\$|\s+", "", text)
    return text.rstrip("=.")


_PLAIN_RATIONAL = re.compile(r"[-+]?(?:\d[\d,]*(?:\.\d+)?|\d+/\d+|\\[dt]?frac\{\d+\}\{\d+\})")
_OPERATION = re.compile(r"[-+*/^<>=×÷(]|\\[a-zA-Z]+")


def restates_expression(answer: str, prompt: str, gold: str) -> bool:
    """Is `answer` an expression the prompt already holds ("77 + 42" for "What is 77 + 42?", "\\sqrt{704}" for
    "Simplify $\\sqrt{704}$.", "(x + 9)(x + 1)" for "Expand ...", an inequality the question asks to solve),
    rather than the reference's own form? Evaluating it would pay a completion that only copies the question. A plain
    number or fraction is never a restatement here (the last-number rule looks at those), nor is an answer written
    exactly as the reference is."""
    exact = re.split(r"\\approx|≈", answer, maxsplit=1)
    if len(exact) == 2 and not re.fullmatch(r"\s*\$?\s*[A-Za-z]\w*\s*", exact[0]):
        answer = exact[0]  # "\\sqrt{360} \\approx 18.97": the parser takes the exact part, so this is the answer
    said = _math_text(answer)
    if len(said) < 3 or _PLAIN_RATIONAL.fullmatch(said) or not _OPERATION.search(said.lstrip("+-")):
        return False
    return said in _math_text(prompt) and said != _math_text(str(gold))

