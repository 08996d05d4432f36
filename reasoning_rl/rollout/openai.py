"""The `openai` rollout engine: a client for a remote OpenAI-compatible completions server
(for example `vllm serve`), with bounded concurrency, retries with backoff, and a clear
error when the server cannot be reached.

Each prompt is one POST to {base_url}/completions with `n`, `logprobs=1` and vLLM's
`return_tokens_as_token_ids=true`, so token ids come back as "token_id:<id>" strings and
the per-token log-probs are the server's sampling log-probs (pi_old). A server that
returns plain token strings needs `tokenizer=` to map them to ids. The API key is read
from an environment variable (never a config file). Standard library HTTP (urllib).

Not here: pushing weights to the server (the scale-out issue adds vLLM's weight-update
API); `update_weights` says so instead of silently sampling from a stale policy.
"""
from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from ..types import Group, Sample
from .base import PromptRow, SamplingConfig, as_rows


class RolloutError(RuntimeError):
    pass


class OpenAIEngine:
    def __init__(self, base_url: str, model: str, tokenizer=None, api_key_env: str = "OPENAI_API_KEY",
                 max_concurrency: int = 8, retries: int = 3, backoff: float = 0.5, timeout: float = 120.0) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"openai engine: base_url must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.tokenizer = tokenizer
        self.api_key = os.environ.get(api_key_env, "")
        self.max_concurrency = max(1, max_concurrency)
        self.retries, self.backoff, self.timeout = retries, backoff, timeout
        self.requests_sent = 0
        self.retried = 0

    def update_weights(self, model) -> None:
        raise NotImplementedError("openai engine: the server's weights are not updated by this client; "
                                  "use the hf/vllm engine for on-policy training, or a server weight-sync hook")

    def _post(self, payload: dict) -> dict:
        url = f"{self.base_url}/completions"
        data = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = ""
        for attempt in range(self.retries + 1):
            self.requests_sent += 1
            try:
                req = urllib.request.Request(url, data=data, headers=headers, method="POST")
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    return json.loads(resp.read().decode())
            except urllib.error.HTTPError as e:
                body = e.read().decode(errors="replace")[:300]
                if e.code < 500 and e.code != 429:
                    raise RolloutError(f"openai engine: {url} answered {e.code}: {body}") from None
                last = f"HTTP {e.code}: {body}"
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as e:
                last = f"{type(e).__name__}: {getattr(e, 'reason', e)}"
            if attempt < self.retries:
                self.retried += 1
                time.sleep(self.backoff * 2**attempt)
        raise RolloutError(f"openai engine: cannot get completions from {url} after {self.retries + 1} tries "
                           f"(last error: {last})")

    def _ids(self, tokens: list[str]) -> list[int]:
        if all(t.startswith("token_id:") for t in tokens):
            return [int(t.split(":", 1)[1]) for t in tokens]
        if self.tokenizer is None:
            raise RolloutError("openai engine: the server returned token strings, not ids; pass tokenizer= "
                               "or serve with return_tokens_as_token_ids support (vLLM)")
        return list(self.tokenizer.convert_tokens_to_ids(tokens))

    def _one(self, row: PromptRow, n: int, s: SamplingConfig) -> Group:
        payload = {"model": self.model, "prompt": row.prompt, "n": n, "max_tokens": s.max_tokens,
                   "temperature": s.temperature, "top_p": s.top_p, "logprobs": 1,
                   "return_tokens_as_token_ids": True}
        if s.top_k:
            payload["top_k"] = s.top_k
        if s.stop:
            payload["stop"] = list(s.stop)
        if s.seed is not None:
            payload["seed"] = s.seed
        out = self._post(payload)
        choices = sorted(out.get("choices", []), key=lambda c: c.get("index", 0))
        if len(choices) != n:
            raise RolloutError(f"openai engine: asked for n={n} completions, got {len(choices)}")
        samples = []
        for c in choices:
            lp = c.get("logprobs") or {}
            ids = self._ids(lp.get("tokens") or [])
            finish = "length" if c.get("finish_reason") == "length" else "stop"
            samples.append(Sample(c.get("text", ""), tuple(ids), tuple(lp.get("token_logprobs") or []), finish))
        return Group(row.prompt_id, row.prompt, row.task, samples)

    def generate(self, prompts: Sequence[PromptRow | dict | str], n: int, sampling: SamplingConfig) -> list[Group]:
        if n < 1:
            raise ValueError(f"generate: n must be >= 1, got {n}")
        if sampling.chat:
            raise ValueError("openai engine: chat=True needs a chat endpoint; apply the template to the prompt")
        rows = as_rows(prompts)
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as ex:
            return list(ex.map(lambda r: self._one(r, n, sampling), rows))
