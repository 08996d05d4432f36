"""An example reasoning-rl verifier plugin: `keywords`.

Score = share of the reference keywords that appear in the completion (case-insensitive);
CORRECT when all of them do. Registered through the entry-point group
`reasoning_rl.verifiers` in this package's pyproject.toml:

    [project.entry-points."reasoning_rl.verifiers"]
    keywords = "rrl_example_plugin:Keywords"
"""
from verifiers import Status, Verdict, Verifier, VerifierSpec


class Keywords(Verifier):
    name = "keywords"
    version = "0.1.0"
    spec = VerifierSpec(needs=("reference",), output_range=(0.0, 1.0), deterministic=True, default_timeout=1.0,
                        description="share of reference keywords present in the completion")

    def verify(self, completion, reference=None, **options):
        words = [w.lower() for w in (reference or [])]
        if not words:
            return Verdict.masked_as(Status.ABSTAIN, "no keywords given")
        text = str(completion).lower()
        hit = sum(w in text for w in words)
        score = hit / len(words)
        if hit == len(words):
            return Verdict.correct(score, f"all {hit} keywords present")
        return Verdict.incorrect(score, f"{hit}/{len(words)} keywords present")
