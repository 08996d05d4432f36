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


# An environment, as docs/tools.md writes one, published through the entry-point group `reasoning_rl.environments`:
#     [project.entry-points."reasoning_rl.environments"]
#     lookup = "rrl_example_plugin:Lookup"
from reasoning_rl.environments import Environment, Step  # noqa: E402 - the verifier above needs none of it


class Lookup(Environment):
    """Answers `[[name]]` from the table each dataset row carries under "facts"."""
    name = "lookup"

    def start(self, row):
        return dict(row.get("facts", {}))

    def call_end(self, text):
        start = text.find("[[")
        end = text.find("]]", start + 2) if start >= 0 else -1
        return end + 2 if end >= 0 else None

    def respond(self, states, segments):
        steps = []
        for facts, seg in zip(states, segments):
            if self.call_end(seg) is None:
                steps.append(Step(done=True, reason="answer"))
                continue
            key = seg[seg.find("[[") + 2: seg.find("]]")].strip()
            known = key in facts
            steps.append(Step(observation=f" = {facts[key] if known else 'unknown'}\n", tool_call=True,
                              program_error=not known, call=key))
        return steps
