"""A user verifier for the pool's fuzz test: its verdict is a pure function of its input, and it
takes a few milliseconds, so kills and interrupts land while calls are in flight.

completion "MS:TEXT": sleep MS milliseconds, then CORRECT (score 1) when TEXT == reference,
INCORRECT with score len(TEXT) % 4 / 4 otherwise (the score tells one call's verdict from
another's). "raise" raises (ERROR, masked); "hang" never returns (TIMEOUT at its deadline).
Importable by any worker, process or Ray actor.
"""
import time

from reasoning_rl.types import Verdict
from verifiers import Verifier, VerifierSpec


class Graded(Verifier):
    name = "fuzz_graded"
    version = "1"
    spec = VerifierSpec(needs=("reference",), default_timeout=30.0)

    def verify(self, completion, reference=None, **options):
        if completion == "raise":
            raise RuntimeError("fuzz: raised on purpose")
        if completion == "hang":
            while True:
                time.sleep(0.01)
        ms, _, text = completion.partition(":")
        time.sleep(int(ms) / 1000)
        if text == reference:
            return Verdict.correct(detail=f"{text!r} matches")
        return Verdict.incorrect(score=len(text) % 4 / 4, detail=f"{text!r} != {reference!r}")
