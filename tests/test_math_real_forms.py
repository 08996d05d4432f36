"""The ways real model outputs were misjudged, each as a table of outputs written here (none copied from a data set).

Classes found by reading where `math` and math-verify disagreed on other models' graded solutions, and by training
the real model (SmolLM2-135M-Instruct): correct answers rejected (equal boxes, currency and "is N." closings,
identities, degrees), wrong ones accepted (a closing sentence that rejects its candidate or talks about something
else, a number only restated from the question), and a reward that pays for echoing the question (math-verify
evaluating "77 + 42" or the expression before an empty box). Run in-process, as test_math_table.py.
"""
import pytest

import verifiers
from reasoning_rl.types import Status
from verifiers.math_extract import STATED_PATHS, extract_answer
from verifiers.math_verifier import MathVerifier

V = MathVerifier()
MV = verifiers.get("math_verify")
C, I, U = Status.CORRECT, Status.INCORRECT, Status.UNPARSEABLE

# (gold, output, status, the extraction path named in the detail)
CLOSINGS = [
    # several boxed answers equal in value are one answer; different ones stay a hedge
    ("5/2", "She needs \\boxed{5/2} cups.\nFinal Answer: \\boxed{\\frac{5}{2}}", C, "equal boxes"),
    ("5/2", "That is \\boxed{2\\frac{1}{2}} cups, or \\boxed{\\frac{5}{2}}.", C, "equal boxes"),
    ("5/2", "Maybe \\boxed{2} or \\boxed{3}.", U, "2 different boxed answers"),
    # money in a closing sentence, no box: the amount is the answer
    ("8", "She spent 12 of her 20 dollars.\nSo she has $8 left.", C, "currency"),
    ("7", "The bill came to 13.\nHe received $7.00 in change.", C, "currency"),
    ("9", "Each costs 3 and he buys 3.\nHe pays $9 in total.", C, "currency"),
    # bold markdown and "... is N." closings are answer forms
    ("6", "Two plus four.\n\n**6**", C, "bold"),
    ("15", "Multiply the leading terms.\nTherefore the degree of the polynomial is 15.", C, "closing statement"),
    ("12", "Counting them again.\nThe number of marbles left is 12 marbles.", C, "closing statement"),
    # a closing sentence that rejects its candidate states no answer, whatever the gold is
    ("3", "Try x = 3: 9 - 6 = 3, not 0.\nSo x = 3 is not a solution.", U, "closing statement rejects a candidate"),
    ("4", "We check 4 again.\nBut 4 does not satisfy the second equation.", U, "closing statement rejects a candidate"),
    # with no sentence to read, the last number stays a fallback, named as such
    ("36", "18 * 2 = 36", C, "whole output"),
    ("36", "First 9 * 2 = 18\n18 * 2 = 36", C, "last number"),
]


@pytest.mark.parametrize("gold,output,status,path", CLOSINGS)
def test_closing_forms(gold, output, status, path):
    v = V.verify(output, gold)
    assert v.status is status and path in v.detail, (v.status, v.detail)


def test_the_closing_forms_that_state_an_answer_count_as_stated():
    """eval/stated reads STATED_PATHS: a currency or "is N." closing states its answer; the last number does not."""
    assert {"equal boxes", "currency", "closing statement"} <= STATED_PATHS and "last number" not in STATED_PATHS
    assert extract_answer("So she has $8 left.") == ("8", "currency")


Q = "Tom had 20 dollars. He bought 3 pens for 4 dollars each. How much change did he receive?"
# (prompt, gold, output, math's status, whether math_verify is guarded the same way): what only the prompt can tell
WITH_PROMPT = [
    # a last number that the question already holds is a restatement, not an answer (a truncated completion
    # that had only copied the question's quantities passed this way)
    (Q, "20", "Tom had 20 dollars and bought pens", U, False),
    ("What is 3 + 5 - 5?", "3", "First 3 + 5 = 8\nThen 8 - 5 = 3", C, False),  # computed, though the prompt has a 3
    # a closing sentence about something else entirely
    (Q, "8", "Let me think about it.\nThe train left at 8 in the morning.", U, False),
    # the answer stated about the question's own quantity passes
    (Q, "8", "3 pens cost 12 dollars. 20 - 12 = 8.\nHe received $8 in change.", C, False),
    # echoing the question's expression is not answering it: math-verify would evaluate it and pay the echo
    ("What is 77 + 42?", "119", "77 + 42", U, True),
    ("What is 42 + 78?", "120", "42 + 78 = \\boxed{}", U, True),  # an empty box after the expression
    ("What is 42 + 78?", "120", "42 + 78 = \\boxed{120}", C, False),
    ("What is 3 - 8?", "-5", "-5", C, False),  # a plain number is never a restatement
    # the question's own expression, equal in value to the answer, answers nothing (MATH-format questions)
    ("Simplify $\\sqrt{704}$.", "8\\sqrt{11}", "Square the number and you will get $\\sqrt{704}$", U, True),
    ("Expand $(x + 9)(x + 1)$.", "x^2 + 10x + 9", "The product is $\\boxed{(x + 9)(x + 1)}$.", U, True),
    ("Solve $3x - 8 > 5$. Express your answer in interval notation.", "(\\frac{13}{3}, \\infty)",
     "We have $3x - 8 > 5$", U, True),
    ("Evaluate $4^{2} - 2^{2}$.", "12", "To evaluate $4^{2} - 2^{2}$", U, True),
    ("Simplify $\\sqrt{360}$.", "6\\sqrt{10}", "$\\sqrt{360}\\approx 18.97$", U, False),  # the exact side
    ("Simplify $\\sqrt{704}$.", "8\\sqrt{11}", "So $\\sqrt{704} = \\boxed{8\\sqrt{11}}$", C, False),
    ("Which is larger, $\\frac{3}{4}$ or $\\frac{2}{3}$?", "\\frac{3}{4}", "$\\boxed{\\frac{3}{4}}$", C, False),
]


@pytest.mark.parametrize("prompt,gold,output,ours,guarded", WITH_PROMPT)
def test_what_the_prompt_tells(prompt, gold, output, ours, guarded):
    v = V.verify(output, gold, prompt=prompt)
    assert v.status is ours, (v.status, v.detail)
    w = MV.verify(output, gold, prompt=prompt)
    if guarded:
        assert w.status is U, (w.status, w.detail)
    if ours is C:  # where the answer is right, math-verify's guards take nothing away
        assert w.status is C, (w.status, w.detail)


def test_math_verify_as_it_is_where_no_guard_applies():
    """Without the prompt, math-verify reads what it reads (its own extraction): what `math` refuses above and
    math-verify still accepts is listed in docs/verifiers.md."""
    assert MV.verify("The train left at 8 in the morning.", "8").status is C
    assert V.verify("The train left at 8 in the morning.", "8", prompt=Q).status is U


# (gold, output, status): what a math span ends with, and a sentence made of spans
SPANS = [
    ("24", "So the value is $4!$", C),  # a factorial's mark is not a full stop
    ("13/21", "It is $\\frac{13}{21}.$", C),  # a full stop inside the span
    ("15", "$f(-2)$ is equal to $5 + 5\\cdot2 = 15$.", C),  # words between spans: the last span, not the whole line
    ("-2", "final answer is found with logs, (B+B-2)/(B!), this gives", I),  # no single number taken from it
]


@pytest.mark.parametrize("gold,output,status", SPANS)
def test_math_spans_and_phrases(gold, output, status):
    assert V.verify(output, gold).status is status


# (gold, prediction, expected): equal through an identity, or written in degrees
IDENTITIES = [
    ("\\sin 2x", "2\\sin x\\cos x", True),  # double angle; a bare argument stops at the next function
    ("\\cos 2x", "1 - 2\\sin^2 x", True),  # double angle, other form
    ("\\sin(x+y)", "\\sin x\\cos y + \\cos x\\sin y", True),  # addition formula
    ("\\sec^2 x", "\\tan^2 x + 1", True),  # Pythagorean
    ("\\cos^4 x - \\sin^4 x", "\\cos 2x", True),  # difference of squares, then double angle
    ("\\frac{\\sqrt{3}}{2}", "\\sin 60^\\circ", True),  # degrees inside a function
    ("\\frac{1}{2}", "\\sin 30^\\circ", True),
    ("\\log(x^2)", "2\\log x", True),  # logarithm of a power (positive x)
    ("\\ln(a) - \\ln(b)", "\\ln(a/b)", True),  # logarithm of a quotient
    ("e^{2\\ln 3}", "9", True),  # exponential of a logarithm
    ("\\sin x", "\\cos x", False),  # different functions
    ("\\sin 2x", "2\\sin x", False),  # the double angle is not a factor of 2
    ("\\frac{1}{2}", "\\sin 60^\\circ", False),  # the wrong angle
    ("\\log(x^2)", "\\log(2x)", False),
]


@pytest.mark.parametrize("gold,pred,expected", IDENTITIES)
def test_identities(gold, pred, expected):
    v = V.verify(f"\\boxed{{{pred}}}", gold)
    assert (v.status is C) is expected, (v.status, v.detail)


# (gold, output written the way SmolLM2-135M-Instruct writes, status): shapes seen in its own completions
SMALL_MODEL = [
    ("42", "17 + 25 = 32\nThe answer is \\boxed{}.", U),  # an empty box after a wrong sum: no answer
    ("3", "#### 3\nThe answer is: 3", C),  # a marker, then a phrase: both say 3
    ("3", "#### 3\nThe answer is: 4", C),  # the marker is trusted first (documented order)
    ("5", "To find the answer, we add 2 and 3.\n\n2 + 3 = 5\n\nSo, the answer is 5.", C),
    ("9", "Let's solve this step by step:\n1. First, we", I),  # cut off: a list number read (eval.truncated: fail)
]


@pytest.mark.parametrize("gold,output,status", SMALL_MODEL)
def test_small_model_shapes(gold, output, status):
    v = V.verify(output, gold)
    assert v.status is status, (v.status, v.detail)


# (gold, output, cut at the token limit, status): a cut text states nothing unless it wrote its answer in an answer form
CUT = [
    ("30", "6 * 5 = 30\n\nSo, there are ", True, U),  # the computation before the cut is no statement
    ("30", "6 * 5 = 30\n\nSo, there are ", False, C),  # the same text ended by the model: the last-number fallback
    ("54", "Lena buys 6 bags * 9 coins = 54 coins", True, U),
    ("140", "this would be 1 * 34/53 * 53 = 140.\nWe've rounded this", True, U),
    ("30", "The answer is 30. Also, the shelves", True, C),  # stated before the cut
    ("30", "So \\boxed{30}, and the shelves", True, C),
    ("12", "#### 12\nThen Omar has", True, C),
    ("\\frac{1}{2}", "We get $\\frac{1}{2}$ and then", True, U),  # the last math span is a fallback too
]


@pytest.mark.parametrize("gold,output,cut,status", CUT)
def test_a_cut_completion_is_read_only_where_it_states_its_answer(gold, output, cut, status):
    assert V.verify(output, gold, **({"truncated": True} if cut else {})).status is status
    w = MV.verify(output, gold, **({"truncated": True} if cut else {}))
    assert w.status is status or (not cut and status is C), (w.status, w.detail)


def test_the_reward_tells_only_the_verifiers_that_read_it_of_the_cut():
    """`exact` has no notion of a cut (an unknown option would be refused): it gets none; `math` does."""
    reward = verifiers.Reward((verifiers.Term("math", 1.0), verifiers.Term("exact", 0.0)), outcome="math")
    with verifiers.VerifierPool(num_workers=1) as pool:
        got = reward.verify(["6 * 5 = 30\n\nSo, there are ", "30"], ["30", "30"], pool=pool, truncated=[True, True])
    assert got[0]["math"].status is U and "cut at the token limit" in got[0]["math"].detail
    # a cut "30": to `math`, a whole output read by a fallback (no answer stated); `exact` compares the text as it is
    assert got[1]["math"].status is U and got[1]["exact"].status is C
