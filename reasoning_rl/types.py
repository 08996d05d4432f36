"""The seam types: the only objects that cross package lines.

Standard library only, so `verifiers`, `sandboxes` and `curricula` can use them
without pulling in torch.

The one rule they carry: a verdict whose `score` is None (ABSTAIN, TIMEOUT, ERROR)
is *masked*. It is never read as 0.0; every statistic, filter and pair builder
skips it and counts it. `Verdict.__post_init__` enforces that a status and its
score agree, so a crashed verifier cannot smuggle a number through.

Deliberately not here: tensors, tokenizers, anything with behaviour beyond
validation and small derived properties.
"""
from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["Status", "Verdict", "Turn", "Sample", "Group", "Pair", "MASKED", "SCORED"]


class Status(str, enum.Enum):
    """What a verifier concluded. The first three are the model's doing; the last
    three mean the verifier has no opinion (the sample is masked)."""

    CORRECT = "correct"
    INCORRECT = "incorrect"
    UNPARSEABLE = "unparseable"  # the model's output has no usable answer: a model failure, scored
    ABSTAIN = "abstain"  # the verifier does not apply (e.g. the reference cannot be parsed)
    TIMEOUT = "timeout"  # the verifier's own budget ran out
    ERROR = "error"  # the verifier, sandbox or judge failed

    @property
    def scored(self) -> bool:
        return self in SCORED


SCORED = frozenset({Status.CORRECT, Status.INCORRECT, Status.UNPARSEABLE})
MASKED = frozenset({Status.ABSTAIN, Status.TIMEOUT, Status.ERROR})


@dataclass(frozen=True)
class Verdict:
    """One verifier's judgement of one completion.

    status:  see `Status`.
    score:   a finite float for scored statuses; None for masked ones (enforced).
    detail:  a short human-readable reason ("extracted '42', gold '42'", "wall time limit").
    metrics: anything numeric worth logging (latency, tests run, ...).
    """

    status: Status
    score: float | None
    detail: str = ""
    metrics: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.status, Status):
            try:
                object.__setattr__(self, "status", Status(self.status))
            except ValueError:
                raise ValueError(f"Verdict.status: unknown status {self.status!r}; "
                                 f"expected one of {[s.value for s in Status]}") from None
        if self.status in MASKED:
            if self.score is not None:
                raise ValueError(f"Verdict.score must be None for status {self.status.value}, got {self.score!r}")
        else:
            if self.score is None or isinstance(self.score, bool) or not isinstance(self.score, (int, float)):
                raise ValueError(f"Verdict.score must be a number for status {self.status.value}, got {self.score!r}")
            if not math.isfinite(self.score):
                raise ValueError(f"Verdict.score must be finite, got {self.score!r}")
            object.__setattr__(self, "score", float(self.score))

    @property
    def masked(self) -> bool:
        return self.status in MASKED

    @property
    def passed(self) -> bool | None:
        """Binary outcome: True if CORRECT, False if INCORRECT/UNPARSEABLE, None if masked."""
        if self.masked:
            return None
        return self.status is Status.CORRECT

    # convenience constructors -------------------------------------------------
    @classmethod
    def correct(cls, score: float = 1.0, detail: str = "", **metrics: float) -> "Verdict":
        return cls(Status.CORRECT, score, detail, metrics)

    @classmethod
    def incorrect(cls, score: float = 0.0, detail: str = "", **metrics: float) -> "Verdict":
        return cls(Status.INCORRECT, score, detail, metrics)

    @classmethod
    def unparseable(cls, score: float = 0.0, detail: str = "", **metrics: float) -> "Verdict":
        return cls(Status.UNPARSEABLE, score, detail, metrics)

    @classmethod
    def masked_as(cls, status: Status, detail: str = "", **metrics: float) -> "Verdict":
        if status not in MASKED:
            raise ValueError(f"masked_as: {status} is not a masked status")
        return cls(status, None, detail, metrics)


@dataclass(frozen=True)
class Turn:
    """One model segment of a multi-turn episode and the environment's answer to it (none on the episode's last).

    model:        what the model wrote in the segment, special tokens skipped (what a verifier of the episode reads)
    ids:          the segment's token ids, as sampled (a slice of the episode's `Sample.token_ids`)
    generate_s:   seconds the engine took for the turn (every live episode's segment of it, at once)
    call:         the tool call the environment read in the segment ("": none)
    observation:  what the environment answered (None: it was not asked: the segment held no call, or the episode
                  ended first)
    tool_s:       seconds the call took
    program_error: the called program raised or ran past a limit (its error is the observation, as a REPL shows it)
    error:        the environment itself failed on this call (the sample is masked ERROR; no observation)
    broken:       the segment opened a tool call the environment could not read (its opener without the rest:
                  `Environment.opens_call`), and so ended the episode as an answer
    template_mismatch: chat format only: the first position where the episode's ids differ from the chat template's
                  rendering of the whole conversation (None: a prefix of it, token for token)
    """

    model: str
    ids: tuple[int, ...] = ()
    generate_s: float = 0.0
    call: str = ""
    observation: str | None = None
    tool_s: float = 0.0
    program_error: bool = False
    error: str = ""
    template_mismatch: int | None = None
    broken: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "ids", tuple(self.ids))

    @property
    def tokens(self) -> int:
        return len(self.ids)

    def to_dict(self) -> dict[str, Any]:
        """The archive's form: every field but the defaults that say nothing happened, plus `tokens`."""
        out = {"model": self.model, "tokens": self.tokens, "generate_s": self.generate_s, "ids": list(self.ids)}
        if self.observation is not None or self.call:
            out.update(call=self.call, observation=self.observation, tool_s=self.tool_s,
                       program_error=self.program_error)
        if self.error:
            out["error"] = self.error
        if self.template_mismatch is not None:
            out["template_mismatch"] = self.template_mismatch
        if self.broken:
            out["broken"] = True
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Turn":
        """A turn from its archive form (an older archive's turns hold no `ids`); unknown keys are refused."""
        known = {f.name for f in dataclasses.fields(cls)} | {"tokens"}
        extra = set(d) - known
        if extra:
            raise ValueError(f"Turn: unknown keys {sorted(extra)}")
        return cls(**{k: v for k, v in d.items() if k != "tokens"})


@dataclass(frozen=True)
class Sample:
    """One completion of one prompt, as sampled by π_old.

    token_ids: response tokens only (no prompt), length n.
    logprobs:  log π_old(token_t | ...) for each of those tokens, length n (or empty if the engine gave none).
    finish_reason: "stop" or "length" (truncated).
    verdicts:  verifier name -> Verdict, filled in after verification.
    weight_version: how many updates the sampling weights had had (None: not recorded). A sample trained on at
               step t is t - 1 - weight_version updates stale.
    floors:    where top-p / top-k cut the distribution the token was drawn from: a value of logits / T halfway
               between the smallest kept and the largest cut, one float a token (4 bytes), so the trainer rebuilds the
               set from its own logits and renormalises over it as the engine did (logprobs are then the kept set's);
               empty: nothing was cut.
    For a multi-turn episode (rollout/episodes.py) token_ids are everything after the prompt (model segments and
    observations, as sampled and as tokenized once), logprobs 0.0 on observation tokens, loss_mask marks the
    model's tokens, and text is what the model wrote (all the verifier reads).
    """

    text: str
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = ()
    finish_reason: str = "stop"
    verdicts: Mapping[str, Verdict] = field(default_factory=dict)
    weight_version: int | None = None
    loss_mask: tuple[int, ...] = ()
    turns: tuple[Turn, ...] = ()  # multi-turn: each model segment and the environment's answer
    error: str = ""  # the environment failed during this episode: masked ERROR whatever the verifiers say
    floors: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "token_ids", tuple(self.token_ids))
        object.__setattr__(self, "logprobs", tuple(self.logprobs))
        object.__setattr__(self, "loss_mask", tuple(self.loss_mask) or (1,) * len(self.token_ids))
        object.__setattr__(self, "floors", tuple(self.floors))
        if self.floors and len(self.floors) != len(self.token_ids):
            raise ValueError(f"Sample.floors has {len(self.floors)} entries for {len(self.token_ids)} tokens")
        object.__setattr__(self, "turns", tuple(t if isinstance(t, Turn) else Turn.from_dict(t) for t in self.turns))
        if self.logprobs and len(self.logprobs) != len(self.token_ids):
            raise ValueError(f"Sample.logprobs has {len(self.logprobs)} entries for {len(self.token_ids)} tokens")
        if len(self.loss_mask) != len(self.token_ids) or set(self.loss_mask) - {0, 1}:
            raise ValueError(f"Sample.loss_mask must be 0/1 for each of the {len(self.token_ids)} tokens, got "
                             f"{len(self.loss_mask)} entries")
        if self.finish_reason not in ("stop", "length"):
            raise ValueError(f"Sample.finish_reason must be 'stop' or 'length', got {self.finish_reason!r}")

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"

    def with_verdicts(self, verdicts: Mapping[str, Verdict]) -> "Sample":
        merged = dict(self.verdicts)
        merged.update(verdicts)
        return dataclasses.replace(self, verdicts=merged)

    def outcome(self, verifier: str) -> bool | None:
        """Pass/fail under one verifier; None when masked or not verified by it."""
        v = self.verdicts.get(verifier)
        return None if v is None else v.passed


@dataclass(frozen=True)
class Group:
    """G samples of one prompt. Filters keep or drop a Group whole.

    row: the prompt's dataset row as the task normalised it (reference answer, tests, metadata), less the prompt.
    """

    prompt_id: str
    prompt: str
    row: Mapping[str, Any] = field(default_factory=dict)
    samples: tuple[Sample, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "samples", tuple(self.samples))

    @property
    def task(self) -> Mapping[str, Any]:
        """The former name of `row`, kept for code written against it."""
        return self.row

    def outcomes(self, verifier: str) -> list[bool | None]:
        return [s.outcome(verifier) for s in self.samples]

    def is_mixed(self, verifier: str) -> bool:
        """At least one pass and one fail among the *scored* samples (docs/algorithms.md §curriculum)."""
        scored = [o for o in self.outcomes(verifier) if o is not None]
        return any(scored) and not all(scored)


@dataclass(frozen=True)
class Pair:
    """A preference pair: chosen passed the outcome verifier, rejected failed it, same prompt.

    A pair of multi-turn episodes also carries each side's token ids after the prompt, as sampled (the model's
    tokens and the tool's outputs between them), and its loss mask (1 on the model's tokens): DPO scores those ids
    with the mask, and chosen/rejected are then the episodes' transcripts, for reading."""

    prompt: str
    chosen: str
    rejected: str
    provenance: Mapping[str, Any] = field(default_factory=dict)
    chosen_ids: tuple[int, ...] = ()
    chosen_mask: tuple[int, ...] = ()
    rejected_ids: tuple[int, ...] = ()
    rejected_mask: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.chosen == self.rejected:
            raise ValueError("Pair.chosen and Pair.rejected are the same text")
        for side in ("chosen", "rejected"):
            ids, mask = tuple(getattr(self, f"{side}_ids")), tuple(getattr(self, f"{side}_mask"))
            object.__setattr__(self, f"{side}_ids", ids)
            object.__setattr__(self, f"{side}_mask", mask)
            if len(ids) != len(mask) or set(mask) - {0, 1}:
                raise ValueError(f"Pair.{side}_mask must be 0/1 for each of the {len(ids)} ids, got {len(mask)}")

    def as_row(self, ids: bool | None = None) -> dict[str, Any]:
        """The pair as DPO trains on it: prompt, chosen, rejected, and a pair of episodes' ids and masks (`ids`:
        whether to carry those columns; default where the pair has them)."""
        row: dict[str, Any] = {"prompt": self.prompt, "chosen": self.chosen, "rejected": self.rejected}
        if self.chosen_ids if ids is None else ids:
            row.update({k: list(getattr(self, k)) for k in ("chosen_ids", "chosen_mask", "rejected_ids",
                                                            "rejected_mask")})
        return row
