"""The answer forms real models still got misread on, in the long forms they write them (each shape in several
variants, written here after solutions graded by their publishers: a placeholder box, a closing statement read by
its subject, a closing answer behind an unreadable span, currency signs, a rejected candidate), and the labels'
own errors judged by value. Each row: (reference, output, prompt or None, expected status, a fragment of the
verdict's detail naming the path taken)."""
from __future__ import annotations

import pytest

from reasoning_rl.types import Status
from verifiers.math_verifier import MathVerifier

C, I, U = Status.CORRECT, Status.INCORRECT, Status.UNPARSEABLE

BOX_PROBLEM = ("What number must be placed in the box in the equation below to produce an equation that has more "
               "than one solution: \\[4x + 6 + 7x - 9 = 12x - 7 - x + \\boxed{\\phantom{2}}?\\]")

PLACEHOLDER_BOXES = [
    # the problem's own placeholder box restated, then the answer boxed
    ("4", "We need $11x - 3 = 11x - 7 + \\boxed{\\phantom{2}}$, so $4 = \\boxed{\\phantom{2}}$.\n\nTherefore, the "
          "answer is \\(\\boxed{4}\\).", BOX_PROBLEM, C, "boxed"),
    ("4", "Both sides have 11x. So $-3 = -7 + \\boxed{\\phantom{2}}$ and the box holds 4.\n\nThe answer is "
          "$\\boxed{4}$.", BOX_PROBLEM, C, "boxed"),
    ("4", "Fill in $\\boxed{\\quad}$: we get $\\boxed{\\quad} = 4$. Final answer: $\\boxed{4}$", None, C, "boxed"),
    ("12", "The blank $\\boxed{}$ must be 12, as $\\boxed{?}$ stands for the missing term.\n\n$\\boxed{12}$", None, C,
     "boxed"),
    ("9", "Let $\\boxed{\\square}$ be the unknown. Then $\\square = 9$, so the answer is $\\boxed{9}$.", None, C,
     "boxed"),
    # a box of the problem (not a placeholder) restated is not an answer either
    ("5", "The problem asks for $\\boxed{x+1}$ when $x = 4$: $\\boxed{x+1} = 5$. So the answer is $\\boxed{5}$.",
     "Evaluate $\\boxed{x+1}$ when $x = 4$.", C, "boxed"),
]

CLOSING_PREDICATE = [
    ("15", "Multiplying the leading terms gives degree $8 + 5 + 2$.\n\nTherefore, the degree of the polynomial "
           "\\((ax^6+bx^8+cx^3+d)(x^5+ex^4+f)(x^2+gx+h)\\) is 15.", None, C, "closing statement"),
    ("7", "We substitute and simplify step by step.\n\nSo the value of \\(f(2) = 2^2 + 3\\) is 7.", None, C,
     "closing statement"),
    ("4", "Checking each case in turn we find four.\n\nThus the number of integers \\(n\\) satisfying \\(1 \\le n^2 "
          "\\le 20\\) is 4.", None, C, "closing statement"),
    ("-3", "By Vieta's formulas the sum is $-b/a$.\n\nHence, the sum of the roots of \\(x^2 + 3x - 10 = 0\\) is "
           "\\(-3\\).", None, C, "closing statement"),
]

BOLD_BEHIND_UNREADABLE = [
    ("6", "The fraction is \\(0.\\overline{365079}\\) with a period of 6 digits. 20 mod 6 = 2, so we need the second "
          "digit of the repeating sequence, which is \"6\". The 20th digit after the decimal point is **6**.", None, C,
     "bold"),
    ("3", "Its expansion \\(0.\\overline{142857}\\frac{?}{}\\) repeats every 6 digits; the 9th digit is the third.\n\n"
          "The answer is **3**.", None, C, ""),
    ("2", "We get \\(\\frac{1}{7} = 0.\\overline{142857}\\), and position 100 is 100 mod 6 = 4 in the period, so "
          "the digit is 8... no, recount: the digit is **2**.", None, C, "bold"),
]

REPEATING_DECIMALS = [
    ("1/3", "So the fraction is $0.\\overline{3}$.", None, C, ""),
    ("\\frac{1}{3}", "The decimal is 0.(3).", None, C, ""),
    ("1/3", "It is 0.333...", None, C, ""),
    ("\\frac{41}{333}", "x = 0.\\overline{123}", None, C, ""),
    ("7/6", "The answer is $1.1\\overline{6}$.", None, C, ""),
]

CURRENCY = [
    ("8", "He buys 3 toys for $24.\n$32 - $24 = $8\n\nSo, after all his transactions, Raymond has $8 left.", None, C,
     ""),
    ("17", "The discount is 15% of $20 = $3.00, so he pays $20 - $3.00 = $17.00.\n\nSo, the final price of "
           "Stephen's groceries is $17.00.", None, C, ""),
    ("15", "Each ticket is $5 and she buys 3, so she pays $\\boxed{\\15}$.", None, C, "boxed"),
    ("42", "She earns $6 an hour for 7 hours: $6 x 7 = $42. She earned $42.", None, C, ""),
    ("2.50", "The pen costs $1.25 and she buys two, so $1.25 + $1.25 = $2.50 in all.", None, C, ""),
]

REJECTED = [
    ("x=3,y=4", "... which is still not equal to \\(-12\\). So, \\( x = 14 \\) and \\( y = 15 \\) is not a "
                "solution.", None, U, ""),
    ("5", "Try 7: 7 * 3 = 21, too big. So 7 is not the answer.", None, U, ""),
    ("9", "Then \\(n = 12\\) does not work either, since 12 is not a solution of the equation.", None, U, ""),
]

LABEL_ERRORS = [  # the graders marked these wrong; they are equal in value
    ("\\frac{137}{111}", "\\boxed{\\frac{411}{333}}", None, C, ""),
    ("11.5", "\\boxed{\\frac{23}{2}}", None, C, ""),
    ("-\\frac{2}{3}", "\\boxed{-\\frac{58}{87}}", None, C, ""),
    ("\\frac{21}{2}\\pi", "\\boxed{10.5\\pi}", None, C, ""),
]

TABLE = PLACEHOLDER_BOXES + CLOSING_PREDICATE + BOLD_BEHIND_UNREADABLE + REPEATING_DECIMALS + CURRENCY + REJECTED + \
    LABEL_ERRORS


@pytest.mark.parametrize("gold, output, prompt, status, path", TABLE)
def test_long_forms(gold, output, prompt, status, path):
    v = MathVerifier().verify(output, gold, **({"prompt": prompt} if prompt else {}))
    assert v.status is status, v.detail
    assert path in v.detail, v.detail
