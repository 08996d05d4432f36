"""`prm`: a process reward model scores each step of a solution; the sequence score aggregates them.

    from verifiers.prm import PRMConfig, PRMVerifier
    prm = PRMVerifier(PRMConfig(model="runs/prm/final", step_tag="\\n"))
    prm.verify("3+4=7\\n\\n7+5=12", prompt="3+4+5=")   # metrics: step_0, step_1, steps; score = min

The completion is split into steps at `step_separator` ("\\n\\n" by default). Each step is
followed by `step_tag` (the marker the PRM was trained to read; e.g. "<extra_0>" for Qwen's PRMs,
"\\n" for our tiny one), and the score is read at that token:
  token_classification  an `AutoModelForTokenClassification` head: p(correct) = softmax(logits)[1]
  plus_minus            a causal LM: p("+") / (p("+") + p("-")) for the token after the tag
Step scores aggregate by `min` (default), `last`, `mean` or `prod`; status CORRECT when the
aggregate reaches `threshold`. `verify_batch` scores a whole batch in one padded forward pass
(CPU or GPU). Step scores travel in `Verdict.metrics` as `step_0`, `step_1`, ... and `steps`, which
the GRPO trainer turns into process-supervision advantages (docs/algorithms.md §process).

Not here: training (see `reasoning_rl/trainers/tiny_prm.py` and `reasoning-rl train prm`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from reasoning_rl.types import Status, Verdict

from .base import Verifier, VerifierSpec

AGGREGATES = {
    "min": min,
    "last": lambda xs: xs[-1],
    "mean": lambda xs: sum(xs) / len(xs),
    "prod": lambda xs: math.prod(xs),
}


@dataclass(frozen=True)
class PRMConfig:
    model: str = ""                  # path or name of the PRM
    mode: str = "token_classification"  # token_classification | plus_minus
    step_separator: str = "\n\n"
    step_tag: str = "\n"
    plus: str = "+"
    minus: str = "-"
    aggregate: str = "min"
    threshold: float = 0.5
    batch_size: int = 32
    max_steps: int = 64              # steps beyond this are scored as one (the rest of the text)
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.mode not in ("token_classification", "plus_minus"):
            raise ValueError(f"PRMConfig.mode must be token_classification or plus_minus, got {self.mode!r}")
        if self.aggregate not in AGGREGATES:
            raise ValueError(f"PRMConfig.aggregate must be one of {sorted(AGGREGATES)}, got {self.aggregate!r}")
        if not self.step_separator:
            raise ValueError("PRMConfig.step_separator must not be empty")


def split_steps(text: str, separator: str, max_steps: int) -> list[str]:
    steps = [s for s in text.strip().split(separator) if s.strip()]
    if len(steps) > max_steps:
        steps = steps[:max_steps - 1] + [separator.join(steps[max_steps - 1:])]
    return steps


class PRMVerifier(Verifier):
    name = "prm"
    version = "1"
    spec = VerifierSpec(needs=("prompt",), output_range=(0.0, 1.0), deterministic=True, default_timeout=120.0,
                        description="process reward model: per-step scores, aggregated (min/last/mean/prod)")

    def __init__(self, config: PRMConfig | None = None, name: str = "prm") -> None:
        self.config = config or PRMConfig()
        self.name = name
        self._loaded = None

    def __getstate__(self):
        return {**self.__dict__, "_loaded": None}

    def config_key(self) -> str:
        c = self.config
        return f"{c.model}|{c.mode}|{c.step_separator!r}|{c.step_tag!r}|{c.aggregate}|{c.threshold}"

    def _load(self):
        if self._loaded is None:
            from .model_backends import load_prm

            if not self.config.model:
                raise ValueError("prm: PRMConfig.model must name a trained PRM (see `reasoning-rl train prm`)")
            self._loaded = load_prm(self.config.model, self.config.mode, self.config.device)
        return self._loaded

    def encode(self, tok, prompt: str, steps: list[str]) -> tuple[list[int], list[int]]:
        """Token ids of prompt + tagged steps, and the position of each step's tag."""
        ids = list(tok(prompt)["input_ids"])
        ends = []
        for step in steps:
            ids += tok(step + self.config.step_tag, add_special_tokens=False)["input_ids"]
            ends.append(len(ids) - 1)
        return ids, ends

    def step_scores(self, prompts: Sequence[str], completions: Sequence[str]) -> list[list[float]]:
        from .model_backends import prm_step_probabilities

        model, tok = self._load()
        c = self.config
        encoded = [self.encode(tok, p, split_steps(t, c.step_separator, c.max_steps)) for p, t in zip(prompts, completions)]
        pad = tok.pad_token_id if tok.pad_token_id is not None else 0
        plus = minus = None
        if c.mode == "plus_minus":
            plus = tok(c.plus, add_special_tokens=False)["input_ids"][-1]
            minus = tok(c.minus, add_special_tokens=False)["input_ids"][-1]
        return prm_step_probabilities(model, encoded, pad, c.mode, plus, minus, c.batch_size, c.device)

    def _verdict(self, scores: list[float]) -> Verdict:
        if not scores:
            return Verdict.unparseable(detail="no steps in the completion")
        agg = AGGREGATES[self.config.aggregate](scores)
        metrics = {f"step_{k}": s for k, s in enumerate(scores)}
        metrics["steps"] = float(len(scores))
        status = Status.CORRECT if agg >= self.config.threshold else Status.INCORRECT
        worst = min(range(len(scores)), key=scores.__getitem__)
        return Verdict(status, agg, f"{self.config.aggregate} of {len(scores)} step scores = {agg:.3f}; "
                                    f"lowest at step {worst}", metrics)

    def verify(self, completion: str, reference: Any = None, prompt: str = "", **options: Any) -> Verdict:
        if options:
            raise ValueError(f"prm: unknown option {next(iter(options))!r}; valid: ['prompt', 'timeout']")
        return self._verdict(self.step_scores([prompt], [completion])[0])

    def verify_batch(self, completions: Sequence[str], references: Sequence[Any], **options: Any) -> list[Verdict]:
        prompts = options.pop("prompts", None) or [""] * len(completions)
        if options:
            raise ValueError(f"prm: unknown option {next(iter(options))!r}")
        return [self._verdict(s) for s in self.step_scores(prompts, completions)]


def prm_term(path: str):
    """The PRM at `path` registered as `prm`, as a weight-0 reward term (its step scores feed process advantages
    and the logs, never the scalar reward). A PRM registered by an earlier run in this process is replaced."""
    from .registry import REGISTRY, distribution, names, register
    from .reward import Term

    if "prm" in names() and distribution("prm") == "user":
        REGISTRY.remove("prm")
    register(PRMVerifier(PRMConfig(model=path), name="prm"))
    return Term("prm", 0.0)
