"""A user verifier that sleeps (to produce TIMEOUTs) — importable by any worker, process or Ray actor."""
import time

from reasoning_rl.types import Verdict
from verifiers import Verifier, VerifierSpec


class Sleepy(Verifier):
    name = "sleepy"
    version = "1"
    spec = VerifierSpec(needs=("reference",), default_timeout=1.0)

    def verify(self, completion, reference=None, **options):
        time.sleep(float(completion))
        return Verdict.correct(detail=f"slept {completion}")
