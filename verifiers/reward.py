"""A reward: a weighted combination of verifiers, one of which is the outcome.

    R = sum_k w_k * score_k        (weight 0 keeps a verifier as a logged metric only)

The *outcome* verifier's pass/fail is what curricula filter on and what pairs are built
from, never the composite (a format bonus can make an all-wrong group look mixed).
If the outcome verdict, or any verdict with a non-zero weight, is masked (ABSTAIN,
TIMEOUT, ERROR), the composite is None: masked, never 0.

Also here: `as_trl_reward`, any verifier or reward as a TRL `GRPOTrainer` reward function.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from reasoning_rl.types import Verdict

from .base import wants_prompt, wants_truncation
from .registry import get
from .runtime import Call, VerifierPool, default_pool


def _wants_prompt(name: str) -> bool:
    """Verifiers that read the prompt get it: those that tell a restated question from an answer (`reads_prompt`:
    `math`, `math_verify`) and any whose spec lists "prompt" (the judge, the PRM)."""
    return wants_prompt(get(name))


@dataclass(frozen=True)
class Term:
    verifier: str
    weight: float = 1.0
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Reward:
    terms: tuple[Term, ...]
    outcome: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "terms", tuple(self.terms))
        names = [t.verifier for t in self.terms]
        if len(set(names)) != len(names):
            raise ValueError(f"reward: a verifier appears twice in {names}")
        if self.outcome not in names:
            raise ValueError(f"reward.outcome {self.outcome!r} is not one of the terms {names}")
        for t in self.terms:
            get(t.verifier)  # unknown names fail here, listing the valid ones

    @classmethod
    def single(cls, name: str, **options: Any) -> "Reward":
        return cls((Term(name, 1.0, options),), name)

    def verify(self, completions: Sequence[str], references: Sequence[Any], prompts: Sequence[str] | None = None,
               pool: VerifierPool | None = None,
               term_references: Mapping[str, Sequence[Any]] | None = None,
               truncated: Sequence[bool] | None = None) -> list[dict[str, Verdict]]:
        """Every term's verdict for every completion (one concurrent batch). `term_references` gives a term its own
        references (another column of the rows); the others check against `references`. `truncated`: which
        completions were cut at their token limit (told to the verifiers that read it, `reads_truncation`)."""
        pool = pool or default_pool()
        if len(completions) != len(references):
            raise ValueError(f"reward: {len(completions)} completions but {len(references)} references")
        own = dict(term_references or {})
        for name, refs in own.items():
            if len(refs) != len(completions):
                raise ValueError(f"reward: {len(completions)} completions but {len(refs)} references for {name!r}")
        calls = []
        for i, (c, r) in enumerate(zip(completions, references)):
            for t in self.terms:
                opts = dict(t.options)
                if prompts is not None and "prompt" not in opts and _wants_prompt(t.verifier):
                    opts["prompt"] = prompts[i]
                if truncated is not None and truncated[i] and wants_truncation(get(t.verifier)):
                    opts["truncated"] = True
                calls.append(Call(t.verifier, c, own[t.verifier][i] if t.verifier in own else r, opts))
        flat = pool.run(calls)
        k = len(self.terms)
        return [{t.verifier: flat[i * k + j] for j, t in enumerate(self.terms)} for i in range(len(completions))]

    def combine(self, verdicts: Mapping[str, Verdict]) -> float | None:
        """The composite score, or None if the outcome or any weighted term is masked."""
        if verdicts[self.outcome].masked:
            return None
        total = 0.0
        for t in self.terms:
            v = verdicts[t.verifier]
            if t.weight == 0:
                continue
            if v.masked:
                return None
            total += t.weight * v.score
        return total

    def passed(self, verdicts: Mapping[str, Verdict]) -> bool | None:
        return verdicts[self.outcome].passed


def as_trl_reward(reward: Reward | str, reference_column: str = "answer",
                  pool: VerifierPool | None = None) -> Callable[..., list[float | None]]:
    """A TRL GRPOTrainer reward function: (prompts, completions, **columns) -> list[float | None].

    Masked samples give None, which TRL treats as "no reward from this function" (NaN, left out of its
    means) rather than 0. Conversational completions (lists of messages) use the last message's content.
    """
    rw = Reward.single(reward) if isinstance(reward, str) else reward

    def reward_fn(prompts=None, completions=None, **columns) -> list[float | None]:
        if completions is None:
            raise ValueError("reward function called without completions")
        if reference_column not in columns:
            raise ValueError(f"reward function needs the dataset column {reference_column!r}; "
                             f"got columns {sorted(columns)}")
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        ps = None if prompts is None else [p[-1]["content"] if isinstance(p, list) else p for p in prompts]
        verdicts = rw.verify(texts, list(columns[reference_column]), ps, pool=pool)
        return [rw.combine(v) for v in verdicts]

    reward_fn.__name__ = "+".join(t.verifier for t in rw.terms)
    return reward_fn
