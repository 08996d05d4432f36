"""The rollout interface: `generate(prompts, n, sampling) -> list[Group]`.

Every sample carries its text, its response token ids, the per-token log-probabilities
of those tokens under the sampling policy pi_old (the distribution each token was drawn from: log softmax(logits / T),
renormalised over the kept set where top-p / top-k cut it, with each token's floor to rebuild that set:
docs/algorithms.md §kept-set; the trainer recomputes the same for the ratio), and its finish reason ("stop" or
"length").

`logprob_mismatch` recomputes the sampled tokens' log-probabilities with the training
model and reports mean and max |delta log p|: the check a trainer runs on any engine.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence

from ..config.knobs import knob
from ..config.sections import GenerationConfig
from ..models.logprobs import pad_completions, pad_prompts, token_logprobs
from ..types import Group


@dataclass(frozen=True)
class SamplingConfig(GenerationConfig):
    """One engine call's sampling: the generation config's knobs (temperature, top_p, max_tokens, declared there
    once) and what a call adds. `SamplingConfig.of(cfg.generation, seed=...)` takes a run's."""
    top_k: int = knob(0, "keep the k most likely tokens (0 = off)", min=0)
    seed: int | None = knob(None, "sampling seed (None = not reseeded)")
    chat: bool = knob(False, "apply the tokenizer's chat template to each prompt")
    share_prefill: bool = knob(True, "hf engine: run each prompt through the model once for all its samples and copy "
                                     "its cache, and a prefix every prompt of a batch begins with (a system prompt, "
                                     "16 tokens or more) once for all of them (the same tokens, log-probs equal up "
                                     "to float noise); off = every sample its own prompt pass")
    reuse_turn_cache: bool = knob(True, "hf engine, multi-turn episodes: keep each episode's KV cache from one turn "
                                        "to the next and run only the new tokens (the observation) through the "
                                        "model (log-probs equal up to float noise); off = every turn re-encodes "
                                        "the whole episode")

    @classmethod
    def of(cls, gen: GenerationConfig, **call: Any) -> "SamplingConfig":
        """The generation config `gen` with one call's own knobs (`seed`, `stop`, `chat`, ...), which may also
        override its own (a command's --temperature)."""
        return cls(**{**{f.name: getattr(gen, f.name) for f in dataclasses.fields(GenerationConfig)}, **call})


@dataclass(frozen=True)
class PromptRow:
    """What an engine needs of a dataset row: an id, the prompt text, and the rest of the row (reference etc.)."""

    prompt_id: str
    prompt: str
    row: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: Mapping[str, Any], index: int = 0) -> "PromptRow":
        if "prompt" not in row:
            raise ValueError(f"dataset row {index} has no 'prompt' column (columns: {sorted(row)})")
        pid = str(row.get("prompt_id", row.get("id", index)))
        # a task row's `columns` (the source row as read) stay with the row, not with every sample of it
        return cls(pid, row["prompt"], {k: v for k, v in row.items() if k not in ("prompt", "prompt_id", "columns")})


class RolloutEngine(Protocol):
    def generate(self, prompts: Sequence[PromptRow], n: int, sampling: SamplingConfig) -> list[Group]: ...

    def update_weights(self, model) -> None: ...


def stop_ids(model, tokenizer) -> list[int]:
    """The token ids that end a completion: the tokenizer's EOS first, then any other the model's generation config
    lists (chat models end a turn with a token of their own, e.g. <|im_end|> beside <|endoftext|>)."""
    ids = [tokenizer.eos_token_id]
    extra = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for i in ([extra] if isinstance(extra, int) else list(extra or [])):
        if i is not None and i not in ids:
            ids.append(i)
    return ids


def save_state(model, path: str) -> None:
    """`model`'s state (anything with `state_dict()`) as one safetensors file at `path`, every tensor under its own
    name, tied ones too. An engine that loads it in place does not re-tie the LM head to the embeddings, and
    `save_pretrained` leaves the tied head out (measured with vLLM's reload: the server then disagreed with the
    trainer by up to 25 nats per token; written out, 1.8e-5)."""
    from safetensors.torch import save_file

    save_file({k: v.detach().cpu().clone().contiguous() for k, v in model.state_dict().items()}, path,
              metadata={"format": "pt"})


def render_prompt(tokenizer, prompt: str, chat: bool, tools: list | None = None) -> str:
    """The text an engine generates from: the prompt itself, or the tokenizer's chat template around it (with
    `tools`, their schemas shown through the template: apply_chat_template's `tools=`)."""
    if chat:
        return tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tools=tools or None,
                                             tokenize=False, add_generation_prompt=True)
    return prompt


def as_rows(prompts: Sequence[PromptRow | Mapping[str, Any] | str]) -> list[PromptRow]:
    out = []
    for i, p in enumerate(prompts):
        if isinstance(p, PromptRow):
            out.append(p)
        elif isinstance(p, str):
            out.append(PromptRow(str(i), p))
        else:
            out.append(PromptRow.from_row(p, i))
    return out


def logprob_mismatch(model, tokenizer, groups: Sequence[Group], temperature: float = 1.0,
                     batch_size: int = 64) -> dict[str, float]:
    """Mean and max |log p_engine - log p_trainer| over all sampled tokens (each over its kept set where the
    engine truncated: types.Sample.floors)."""
    import torch

    from ..models.logprobs import pad_floors

    pairs = [(g.prompt, s) for g in groups for s in g.samples if s.token_ids and s.logprobs]
    if not pairs:
        return {"rollout/logprob_mismatch_mean": 0.0, "rollout/logprob_mismatch_max": 0.0}
    total, count, worst = 0.0, 0, 0.0
    for i in range(0, len(pairs), batch_size):
        chunk = pairs[i:i + batch_size]
        p_ids, p_mask = pad_prompts([tokenizer(p)["input_ids"] for p, _ in chunk], tokenizer.pad_token_id)
        c_ids, c_mask = pad_completions([list(s.token_ids) for _, s in chunk], tokenizer.pad_token_id)
        dev = model.device
        floor = pad_floors([s.floors for _, s in chunk], tuple(c_ids.shape))
        floor = None if floor is None else floor.to(dev)
        with torch.no_grad():
            lp = token_logprobs(model, p_ids.to(dev), p_mask.to(dev), c_ids.to(dev), c_mask.to(dev),
                                temperature=temperature or 1.0, floor=floor).cpu()
        for row, (_, s) in enumerate(chunk):
            d = (lp[row, :len(s.token_ids)] - torch.tensor(s.logprobs, dtype=lp.dtype)).abs()
            total += d.sum().item()
            count += d.numel()
            worst = max(worst, d.max().item())
    return {"rollout/logprob_mismatch_mean": total / count, "rollout/logprob_mismatch_max": worst}


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """The length of the longest common prefix of two id sequences."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
