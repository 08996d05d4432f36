"""The `math` verifier on a table of (gold, prediction, expected) cases, one comment per row.

Written for this project (not copied from any suite). `expected` is the verdict we want:
True = CORRECT, False = not CORRECT (INCORRECT or UNPARSEABLE). Run in-process: the
runtime's worker/timeout machinery is tested in test_verifier_runtime.py.
"""
import pytest

from reasoning_rl.types import Status
from verifiers.math_verifier import MathVerifier

V = MathVerifier()

CASES = [
    # ---- integers and separators
    ("42", "42", True),  # identical
    ("42", "43", False),  # off by one
    ("-7", "-7", True),  # negative
    ("-7", "7", False),  # sign matters
    ("0", "-0", True),  # negative zero is zero
    ("1000000", "1,000,000", True),  # thousands commas
    ("1000000", "1 000 000", True),  # thousands spaces
    ("1234567", "1,234,567", True),  # more commas
    ("12345", "12,345", True),  # one separator
    ("1234", "1,234.0", True),  # separator and trailing .0
    ("1234", "12,34", False),  # malformed grouping is not 1234
    ("7", "007", True),  # leading zeros
    ("100", "10^2", True),  # power form
    ("1024", "2^{10}", True),  # latex power
    ("64", "4^3", True),  # plain power
    ("65", "4^3", False),  # wrong power
    ("6", "3!", True),  # factorial
    ("10", "\\binom{5}{2}", True),  # binomial
    ("11", "\\binom{5}{2}", False),  # wrong binomial
    ("5", "+5", True),  # explicit plus
    ("12", "12.", True),  # sentence full stop
    # ---- decimals
    ("0.5", "0.5", True),  # identical
    ("0.5", ".5", True),  # no leading zero
    ("0.5", "0.50", True),  # trailing zero
    ("2.5", "2.50000", True),  # many trailing zeros
    ("0.1", "0.10000000001", False),  # close is not equal
    ("3.14", "3.141", False),  # different decimals
    ("1.5", "1.05", False),  # digit order
    ("2", "2.0", True),  # integer as decimal
    ("2", "2.01", False),  # near integer
    ("0.333", "1/3", False),  # 3 digits do not make 1/3
    ("0.333333333", "1/3", True),  # 9 significant digits round to 1/3
    ("1/3", "0.3333333333", True),  # symmetric: prediction rounded with 10 digits
    ("1/3", "0.33", False),  # 2 digits: not accepted
    ("\\frac{2}{3}", "0.6666667", True),  # rounded last digit, 7 digits
    ("\\frac{2}{3}", "0.6666", False),  # truncated, 4 digits
    ("\\sqrt{2}", "1.41421356", True),  # 9 digits of sqrt 2
    ("\\sqrt{2}", "1.414", False),  # 4 digits
    ("\\pi", "3.14159265", True),  # 9 digits of pi
    ("\\pi", "3.14", False),  # 3 digits of pi
    ("0.0001", "10^{-4}", True),  # small decimal
    # ---- fractions
    ("\\frac{1}{2}", "1/2", True),  # latex vs slash
    ("\\frac{1}{2}", "0.5", True),  # fraction vs decimal
    ("\\frac{1}{2}", "\\dfrac{1}{2}", True),  # dfrac
    ("\\frac{1}{2}", "\\tfrac12", True),  # tfrac shorthand
    ("\\frac{1}{2}", "\\frac12", True),  # frac shorthand
    ("\\frac{1}{2}", "2/4", True),  # unreduced
    ("\\frac{1}{2}", "\\frac{1}{3}", False),  # different fraction
    ("\\frac{3}{4}", "\\frac{4}{3}", False),  # inverted
    ("-\\frac{2}{3}", "\\frac{-2}{3}", True),  # sign placement
    ("-\\frac{2}{3}", "2/(-3)", True),  # sign in denominator
    ("-\\frac{2}{3}", "\\frac{2}{3}", False),  # missing sign
    ("\\frac{10}{4}", "\\frac{5}{2}", True),  # equal fractions
    ("\\frac{\\sqrt{3}}{2}", "\\frac{1}{2}\\sqrt{3}", True),  # radical placement
    ("\\frac{\\sqrt{3}}{3}", "\\frac{1}{\\sqrt{3}}", True),  # rationalised
    ("\\frac{1}{\\sqrt{2}}", "\\frac{\\sqrt{2}}{2}", True),  # rationalised again
    ("\\frac{3}{5}", "0.6", True),  # exact decimal
    ("\\frac{7}{8}", "0.875", True),  # exact decimal
    ("\\frac{7}{8}", "0.87", False),  # truncated
    ("\\frac{a}{b}", "a/b", True),  # symbolic fraction
    ("\\frac{a}{b}", "b/a", False),  # symbolic inverted
    # ---- mixed numbers
    ("1\\frac{1}{2}", "1.5", True),  # latex mixed number
    ("1\\frac{1}{2}", "3/2", True),  # mixed vs improper
    ("2 1/4", "9/4", True),  # plain mixed number
    ("2 1/4", "2.25", True),  # plain mixed vs decimal
    ("3\\frac{2}{3}", "11/3", True),  # mixed thirds
    ("3\\frac{2}{3}", "3.66", False),  # rounded too coarsely
    ("2\\frac{1}{2}", "2", False),  # not just the integer part
    ("-1\\frac{1}{2}", "-1.5", True),  # negative mixed number
    # ---- percentages
    ("50\\%", "50", True),  # percent sign dropped
    ("50\\%", "50%", True),  # plain percent
    ("50\\%", "0.5", True),  # as a proportion
    ("50\\%", "5", False),  # wrong value
    ("12.5\\%", "12.5", True),  # decimal percent
    ("12.5%", "1/8", True),  # percent vs fraction
    ("25", "25\\%", True),  # gold bare, prediction with percent
    ("25", "30%", False),  # wrong percent
    # ---- currency
    ("10", "\\$10", True),  # dollar sign
    ("10.50", "\\$10.50", True),  # cents
    ("10.50", "$10.5", True),  # plain dollar
    ("10", "\\$11", False),  # wrong amount
    ("1500", "\\$1,500", True),  # currency with separator
    # ---- units
    ("10", "10 cm", True),  # unit word
    ("10", "10\\text{ cm}", True),  # latex text unit
    ("10", "10 \\text{cm}^2", True),  # squared unit
    ("10", "10 square units", True),  # square units
    ("10", "10 meters", True),  # long unit
    ("10", "11 meters", False),  # wrong number with unit
    ("72", "72^\\circ", True),  # degrees symbol
    ("72", "72 degrees", True),  # degrees word
    ("72^\\circ", "72", True),  # gold with degrees
    ("\\frac{1}{3}", "\\frac{1}{3} \\text{ meters}", True),  # unit after a fraction
    ("5", "5 \\mbox{ hours}", True),  # mbox unit
    # ---- scientific notation
    ("0.00012", "1.2 \\times 10^{-4}", True),  # latex times
    ("0.00012", "1.2e-4", True),  # e notation
    ("0.00012", "1.2E-4", True),  # capital E
    ("120000", "1.2 \\cdot 10^5", True),  # cdot
    ("120000", "1.2 \\times 10^{4}", False),  # wrong exponent
    ("6.02 \\times 10^{23}", "6.02e23", True),  # both scientific
    ("6.02 \\times 10^{23}", "6.03e23", False),  # different mantissa
    ("3 \\times 10^{8}", "300000000", True),  # expanded
    # ---- LaTeX constructs
    ("\\sqrt{8}", "2\\sqrt{2}", True),  # simplified radical
    ("\\sqrt{8}", "2\\sqrt{3}", False),  # wrong radical
    ("\\sqrt{12}", "2\\sqrt3", True),  # sqrt shorthand
    ("\\sqrt[3]{27}", "3", True),  # cube root
    ("\\sqrt[3]{16}", "2\\sqrt[3]{2}", True),  # cube root simplification
    ("\\left(\\frac{1}{2}\\right)^2", "\\frac14", True),  # left/right
    ("\\frac{\\pi}{2}", "\\pi/2", True),  # pi fraction
    ("\\frac{\\pi}{2}", "pi/2", True),  # plain pi
    ("\\frac{\\pi}{2}", "\\frac{\\pi}{3}", False),  # wrong angle
    ("2\\pi", "2*pi", True),  # star multiplication
    ("e^2", "\\mathrm{e}^2", True),  # roman e
    ("e", "\\exp(1)", True),  # exp(1)
    ("\\infty", "\\infty", True),  # infinity
    ("\\infty", "-\\infty", False),  # minus infinity
    ("\\text{odd}", "odd", True),  # text answer
    ("\\text{odd}", "even", False),  # wrong text
    ("5", "\\text{5}", True),  # number in text
    ("\\frac{1+\\sqrt{5}}{2}", "\\frac{\\sqrt{5}+1}{2}", True),  # golden ratio order
    ("\\frac{1+\\sqrt{5}}{2}", "\\frac{\\sqrt{5}-1}{2}", False),  # conjugate
    ("\\log_2 8", "3", True),  # log base
    ("\\ln(e^3)", "3", True),  # natural log
    ("\\sin\\frac{\\pi}{6}", "\\frac12", True),  # trig value
    ("\\cos(\\pi)", "-1", True),  # cos pi
    ("\\tan(\\pi/4)", "1", True),  # tan
    ("|{-3}|", "3", True),  # absolute value
    ("\\left|-3\\right|", "3", True),  # left-right abs
    # ---- plain-text algebra
    ("sqrt(2)", "\\sqrt{2}", True),  # plain sqrt vs latex
    ("sqrt(2)/2", "1/sqrt(2)", True),  # plain rationalised
    ("x^2", "x**2", True),  # python power
    ("x^2+2x+1", "(x+1)^2", True),  # factored
    ("x^2+2x+1", "(x+1)(x+1)", True),  # implicit multiplication
    ("x^2+2x+1", "(x-1)^2", False),  # wrong sign
    ("x^2-1", "(x-1)(x+1)", True),  # difference of squares
    ("2x+3", "3+2x", True),  # commutative
    ("2x+3", "2*x+3", True),  # explicit star
    ("2x+3", "2x-3", False),  # sign
    ("cos(x)", "\\cos x", True),  # plain vs latex function
    ("cos(x)", "sin(x)", False),  # different function
    ("sin(x)^2+cos(x)^2", "1", True),  # pythagorean identity
    ("sin(2x)", "2sin(x)cos(x)", True),  # double angle
    ("cos(2x)", "1-2sin(x)^2", True),  # double angle cosine
    ("cos(2x)", "2sin(x)^2-1", False),  # sign error
    ("log(x^2)", "2log(x)", True),  # log power (real domain x > 0)
    ("log(a*b)", "log(a)+log(b)", True),  # log product
    ("e^(2x)", "(e^x)^2", True),  # exponent rule
    ("x^(1/2)", "sqrt(x)", True),  # fractional exponent
    ("sqrt(x^2)", "x", False),  # |x| is not x for negative x
    ("1/(x-1)", "-1/(1-x)", True),  # sign moved
    ("1/(x-1)", "1/(1-x)", False),  # sign lost
    ("(x^2-4)/(x-2)", "x+2", True),  # cancellation
    ("ab+ac", "a(b+c)", True),  # implicit multiplication of letters
    ("3x", "x \\cdot 3", True),  # coefficient after
    ("x3", "3x", False),  # x3 is a name, not 3 times x
    ("x+y", "x-y", False),  # sign between two variables
    ("xy", "x+y", False),  # product vs sum
    ("x^3", "x^2", False),  # degree
    ("e^x", "x^e", False),  # base and exponent swapped
    ("ln(2)", "log(2, 10)", False),  # natural log vs common log
    ("tan(x)", "sin(x)/cos(x)", True),  # tangent identity
    ("x/2", "0.5x", True),  # decimal coefficient
    ("n(n+1)/2", "\\frac{n^2+n}{2}", True),  # triangular numbers
    ("n!", "n\\cdot(n-1)!", True),  # factorial recursion
    ("(n+1)!", "n!", False),  # different factorial
    ("2^n", "2^{n}", True),  # braces
    ("2^(n+1)", "2\\cdot 2^n", True),  # exponent arithmetic
    ("2^(n+1)", "2^n+1", False),  # precedence
    # ---- equations vs expressions
    ("y = 2x+1", "2x+1", True),  # drop lone left side
    ("y = 2x+1", "y=2x+1", True),  # identical equation
    ("y = 2x+1", "y = 1+2x", True),  # commuted right side
    ("y = 2x+1", "2x - y + 1 = 0", True),  # rearranged equation
    ("y = 2x+1", "2y = 4x + 2", True),  # scaled equation
    ("y = 2x+1", "y = 2x-1", False),  # different line
    ("y = 2x+1", "x = 2y+1", False),  # swapped variables
    ("x = 3", "3", True),  # value of the variable
    ("3", "x = 3", True),  # prediction names the variable
    ("3", "x = 4", False),  # wrong value with a name
    ("x = 3", "x = 4", False),  # wrong value
    ("f(x) = x^2", "x^2", True),  # function definition
    ("f(x) = x^2", "g(x) = x^2", True),  # renamed function
    ("x^2 + y^2 = 1", "y^2 + x^2 = 1", True),  # circle commuted
    ("x^2 + y^2 = 1", "x^2 + y^2 = 2", False),  # different radius
    ("x^2 = 4", "x = 2", False),  # lost a root
    ("x^2 = 4", "(x-2)(x+2) = 0", True),  # factored equation
    ("2 + 2 = 4", "4", True),  # chain, final value
    ("\\sqrt{16} = 4", "4", True),  # worked value
    ("4", "2 + 2 = 4", True),  # chain in the prediction
    ("4", "2 + 2 = 5", False),  # wrong final value
    ("x = 1, y = 2", "(1, 2)", True),  # named values vs tuple
    ("x = 1, y = 2", "1, 2", True),  # named values vs bare list
    ("x = 1, y = 2", "2, 3", False),  # wrong values
    ("x=1, y=2", "y=2, x=1", True),  # order of named values
    # ---- inequalities and intervals
    ("x > 2", "2 < x", True),  # flipped
    ("x > 2", "x >= 2", False),  # strictness
    ("x > 2", "x < 2", False),  # direction
    ("x > 2", "(2, \\infty)", True),  # as interval
    ("x \\geq 2", "[2, \\infty)", True),  # closed interval
    ("x \\geq 2", "(2, \\infty)", False),  # open vs closed
    ("x < 3", "(-\\infty, 3)", True),  # left-infinite
    ("-1 < x < 1", "(-1, 1)", True),  # chain as interval
    ("-1 \\le x \\le 1", "[-1, 1]", True),  # closed chain
    ("-1 \\le x \\le 1", "(-1, 1)", False),  # open vs closed
    ("x^2 < 4", "-2 < x < 2", True),  # solved quadratic inequality
    ("x^2 < 4", "(-2, 2)", True),  # quadratic inequality as interval
    ("x^2 > 4", "(-\\infty, -2) \\cup (2, \\infty)", True),  # union
    ("x^2 > 4", "(2, \\infty)", False),  # missing half
    ("[1, 2)", "[1, 2)", True),  # same interval
    ("[1, 2)", "[1, 2]", False),  # endpoint
    ("[1, 2)", "(1, 2)", False),  # other endpoint
    ("(0, \\infty)", "(0, \\infty)", True),  # unbounded
    ("[\\frac12, 3]", "[0.5, 3]", True),  # endpoints by value
    ("(-\\infty, 0] \\cup [1, \\infty)", "(-\\infty,0]\\cup[1,\\infty)", True),  # union spacing
    ("x \\in [0, 1]", "[0, 1]", True),  # membership
    ("2x > 4", "x > 2", True),  # scaled inequality
    ("-2x > 4", "x < -2", True),  # sign flip on division
    ("-2x > 4", "x > -2", False),  # forgot the flip
    ("a < b", "b > a", True),  # two variables
    ("a < b", "a > b", False),  # two variables, wrong way
    # ---- sets, tuples, lists (order policy: sets and bare lists unordered; tuples and [lists] ordered)
    ("\\{1, 2, 3\\}", "\\{3, 2, 1\\}", True),  # set order
    ("\\{1, 2, 3\\}", "\\{1, 2\\}", False),  # missing element
    ("\\{1, 2\\}", "\\{1, 2, 2\\}", True),  # duplicates in a set
    ("\\{1, 2\\}", "\\{1, 2, 3\\}", False),  # extra element
    ("1, 2, 3", "3, 2, 1", True),  # bare list: unordered
    ("1, 2, 3", "1, 2", False),  # bare list missing
    ("-2, 3", "3, -2", True),  # roots in any order
    ("-2, 3", "x = -2, x = 3", True),  # roots named
    ("(1, 2)", "(1, 2)", True),  # tuple
    ("(1, 2)", "(2, 1)", False),  # tuple order
    ("(1, 2, 3)", "(1, 2, 3)", True),  # triple
    ("(1, 2, 3)", "(1, 3, 2)", False),  # triple order
    ("(1, 2, 3)", "(1, 2)", False),  # triple vs pair
    ("(\\frac12, -1)", "(0.5, -1)", True),  # tuple with values
    ("[1, 2, 3]", "[1, 2, 3]", True),  # list
    ("[1, 2, 3]", "[3, 2, 1]", False),  # list order
    ("(1, 2), (3, 4)", "(3, 4), (1, 2)", True),  # list of points, unordered
    ("(1, 2), (3, 4)", "(1, 2), (4, 3)", False),  # a point reversed
    ("\\{(1, 2), (3, 4)\\}", "\\{(3, 4), (1, 2)\\}", True),  # set of points
    ("\\emptyset", "\\emptyset", True),  # empty set
    ("\\pm 2", "2, -2", True),  # plus-minus
    ("\\pm 2", "2", False),  # half of plus-minus
    # ---- matrices and vectors
    ("\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}", "\\begin{bmatrix} 1 & 2 \\\\ 3 & 4 \\end{bmatrix}", True),  # pmatrix vs bmatrix
    ("\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}", "\\begin{pmatrix} 1 & 3 \\\\ 2 & 4 \\end{pmatrix}", False),  # transposed
    ("\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}", "\\begin{pmatrix} 1 & 2 & 3 & 4 \\end{pmatrix}", False),  # shape
    ("\\begin{pmatrix} \\frac12 \\\\ 1 \\end{pmatrix}", "\\begin{pmatrix} 0.5 \\\\ 1 \\end{pmatrix}", True),  # values
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "(1, 2)", True),  # column vector vs tuple
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "(2, 1)", False),  # vector order
    ("\\begin{vmatrix} 1 & 2 \\\\ 3 & 4 \\end{vmatrix}", "-2", True),  # determinant
    ("\\begin{pmatrix} x & 0 \\\\ 0 & x \\end{pmatrix}", "\\begin{pmatrix} x & 0 \\\\ 0 & x \\end{pmatrix}", True),  # symbolic
    # ---- complex numbers
    ("1+2i", "2i+1", True),  # order
    ("1+2i", "1-2i", False),  # conjugate
    ("1+2i", "i(2-i)", True),  # product form
    ("i", "\\sqrt{-1}", True),  # sqrt of -1
    ("3-4i", "3 - 4I", True),  # python I
    ("-1", "i^2", True),  # i squared
    ("\\frac{1}{2}+\\frac{\\sqrt{3}}{2}i", "e^{i\\pi/3}", True),  # Euler form
    ("2i", "2", False),  # dropped i
    # ---- multiple choice
    ("B", "B", True),  # bare letter
    ("B", "(B)", True),  # parenthesised
    ("B", "\\textbf{B}", True),  # bold
    ("B", "\\text{(B)}", True),  # text parenthesised
    ("B", "The answer is (B).", True),  # in prose
    ("B", "I think the answer is B, since the others fail.", True),  # in prose with reason
    ("B", "B. 42", True),  # letter with option text
    ("B", "C", False),  # wrong letter
    ("B", "The answer is (C).", False),  # wrong letter in prose
    ("B", "The answer is A or B or C", False),  # enumeration hedge
    ("B", "\\boxed{A} \\boxed{B}", False),  # two letters boxed
    ("B", "The answer is B, not A.", True),  # the rejection after the comma is not a hedge
    ("(D)", "\\boxed{D}", True),  # boxed letter, gold parenthesised
    # ---- very large and very small values (no rounding collapses)
    ("\\frac{1}{2004!}", "\\frac{1}{2006!}", False),  # tiny, different
    ("\\frac{1}{2004!}", "\\frac{1}{2004!}", True),  # tiny, same
    ("\\frac{1}{2^{99}}", "\\frac{1}{2^{98}}", False),  # tiny powers
    ("\\frac{1}{2^{99}}", "2^{-99}", True),  # tiny powers equal
    ("2^{100}", "1267650600228229401496703205376", True),  # exact big integer
    ("2^{100}", "1267650600228229401496703205377", False),  # off by one, 31 digits
    ("10^{100}", "10^{100}+1", False),  # googol plus one
    ("10^{-30}", "10^{-31}", False),  # tiny different
    ("10^{-30}", "0", False),  # tiny is not zero
    ("3^{200}", "9^{100}", True),  # same huge number
    ("100!", "100 \\cdot 99!", True),  # factorial identity
    ("\\frac{100!}{98!}", "9900", True),  # factorial ratio
    # ---- extraction from full outputs
    ("42", "We compute 6*7. The answer is 42.", True),  # answer phrase
    ("42", "Step 1: 6*7 = 42\nFinal answer: 42", True),  # final answer line
    ("42", "Thus \\boxed{42}", True),  # boxed
    ("42", "\\boxed{42} is the result, and \\boxed{42} again", True),  # repeated same box
    ("42", "<answer>42</answer>", True),  # answer tags
    ("42", "<think>6*7</think><answer> 42 </answer>", True),  # think + answer
    ("42", "first I got \\boxed{41}, so \\boxed{42}", False),  # two different boxes: hedge
    ("42", "The answer is 41.", False),  # wrong in prose
    ("42", "", False),  # empty output
    ("42", "   ", False),  # whitespace output
    ("42", "\\boxed{}", False),  # empty box
    ("42", "I don't know.", False),  # no answer
    ("42", "It is either 41 or 42", False),  # no committed answer
    ("\\frac{1}{2}", "Hence the probability is $\\frac{1}{2}$.", True),  # last math span
    ("5", "Let x = 5. Then 2x = 10. So the answer is x = 5", True),  # named answer in phrase
    ("10", "Area equals \\boxed{10} square units", True),  # boxed with unit words outside
    ("3", "**Final Answer:** **3**", True),  # markdown bold
    ("12", "The final answer is $12$. I hope it is correct.", True),  # boilerplate tail
    ("1/2", "The ratio is [1/2].", True),  # bracketed answer
    ("7", "答案是 7", True),  # non-English answer phrase
    # ---- references the verifier cannot use are ABSTAIN (tested below), hacks
    ("5", "5 or 6", False),  # enumeration of two numbers
    ("5", "\\boxed{5} \\boxed{6}", False),  # two boxes
    ("5", "\\boxed{5 \\text{ or } 6}", False),  # hedge inside the box
    ("5", "5" * 5000, False),  # a huge number of fives
    ("2", "\\boxed{1+1=3}", False),  # a chain whose last value is wrong
    ("x+1", "\\boxed{x+1} or \\boxed{x+2}", False),  # hedged expressions
]


@pytest.mark.parametrize("gold,pred,expected", CASES)
def test_math_table(gold, pred, expected):
    v = V.verify(pred, gold)
    assert v.status is not Status.ABSTAIN, f"reference {gold!r} was not usable: {v.detail}"
    assert (v.status is Status.CORRECT) is expected, f"{gold!r} vs {pred!r}: {v.status.value} ({v.detail})"


def test_table_is_large_enough():
    assert len(CASES) >= 300, len(CASES)
    assert sum(e for _, _, e in CASES) >= 100 and sum(not e for _, _, e in CASES) >= 100


# (reference, why it cannot be used) -> ABSTAIN, masked
ABSTAIN = [
    ("", "empty reference"),
    ("\\frac{", "unbalanced LaTeX"),
    ("@@@", "not maths"),
]


@pytest.mark.parametrize("gold,why", ABSTAIN)
def test_unusable_reference_abstains(gold, why):
    v = V.verify("42", gold)
    assert v.status is Status.ABSTAIN and v.score is None, (why, v)


def test_prompt_echo_is_not_an_answer():
    prompt = "What is 2+3? The answer is 5 or 6, pick one."
    v = V.verify(prompt + "\nI am not sure.", "5", prompt=prompt)
    assert v.status is not Status.CORRECT


# (prompt, output, gold, expected status): a prompt is taken out of the output as an echo only when it is one;
# a very short prompt or a bare number would take every occurrence of itself out of the answer
ECHOES = [
    ("7", "The answer is 7.", "7", Status.CORRECT),  # a bare-number prompt: the model's 7 is its answer
    ("2+2", "2+2 = \\boxed{4}", "4", Status.CORRECT),  # under four characters: left in place
    ("4", "2 + 2 = 4", "4", Status.CORRECT),  # was "2 + 2 = " once the prompt "4" was taken out everywhere
    ("12+7=", "12+7= \\boxed{19}", "19", Status.CORRECT),  # an echoed expression, then the answer
    ("Compute 3*4. Give 12 or 13.", "Compute 3*4. Give 12 or 13.", "12", Status.UNPARSEABLE),  # the echo alone
]


@pytest.mark.parametrize("prompt,output,gold,status", ECHOES)
def test_only_a_real_echo_of_the_prompt_is_taken_out(prompt, output, gold, status):
    assert V.verify(output, gold, prompt=prompt).status is status
