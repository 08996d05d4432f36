"""The `openai` rollout engine: a client for a remote OpenAI-compatible completions server
(for example `vllm serve`), with bounded concurrency, retries with backoff, and a clear
error when the server cannot be reached.

Each prompt is one POST to {base_url}/completions with `n`, `logprobs=1` and vLLM's
`return_tokens_as_token_ids=true`, so token ids come back as "token_id:<id>" strings and
the per-token log-probs are the server's sampling log-probs (pi_old). A server that
returns plain token strings needs `tokenizer=` to map them to ids. The API key is read
from an environment variable (never a config file). Standard library HTTP (urllib).

Weights reach a vLLM server through a shared checkpoint path (`weights_dir=`, a folder the
server can read: same machine, NFS, a mounted bucket): `update_weights(model)` saves the
trainer's model there as safetensors, then asks the server to reload in place through vLLM's
development endpoints (`vllm serve` with VLLM_SERVER_DEV_MODE=1): POST /collective_rpc
{"method": "reload_weights", "kwargs": {"weights_path": ...}} (every worker, tensor/data
parallel included), then POST /reset_prefix_cache. Without `weights_dir`, `update_weights`
raises instead of letting a trainer sample from a stale policy unawares.

`continue_ids(seqs, max_new, stops, sampling, seeds)` sends token ids as the prompt (a list of ints, which
vLLM's completions endpoint takes) with `stop_token_ids`, for multi-turn episodes (rollout/episodes.py): the server
continues the exact sequence, nothing is decoded and encoded again. A server that answers without token ids
is refused in one line.

Not here: NCCL/IPC weight transfer (vLLM's /init_weight_transfer_engine family; GPU only).
"""
from __future__ import annotations

import json
import os
import shutil
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from ..types import Group, Sample
from .base import PromptRow, SamplingConfig, as_rows, save_state


class RolloutError(RuntimeError):
    pass


def push_deadline(model, given: float = 0.0) -> float:
    """Seconds a weight push may take before the run stops: `given` when > 0, else sized to what is written and
    reloaded (60 s, plus 30 s per GiB of weights; a LoRA push: its adapters)."""
    if given > 0:
        return given
    trained = [p for p in model.parameters() if p.requires_grad] if hasattr(model, "peft_config") else \
        list(model.parameters())
    return 60.0 + 30.0 * sum(p.numel() * p.element_size() for p in trained) / 2**30


class OpenAIEngine:
    def __init__(self, base_url: str, model: str, tokenizer=None, api_key_env: str = "OPENAI_API_KEY",
                 max_concurrency: int = 8, retries: int = 3, backoff: float = 0.5, timeout: float = 120.0,
                 weights_dir: str | None = None, admin_url: str | None = None, push_timeout: float = 0.0) -> None:
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
        self.weights_dir = weights_dir
        # the dev endpoints live at the server's root, beside /v1
        self.admin_url = (admin_url or (self.base_url[:-3] if self.base_url.endswith("/v1") else self.base_url)).rstrip("/")
        self.weight_version = 0
        self.last_push_s = 0.0
        self.push_timeout = push_timeout  # 0 = sized to the model (push_deadline)
        self.served = model  # the name requests ask for: the served model, or the adapters pushed last
        self.busy_s = 0.0  # seconds spent waiting on this server's answers (its latency, summed over requests)

    def write_weights(self, model) -> str:
        """The next version's folder under weights_dir, written once (a fleet writes it for every server): the whole
        model as safetensors, or with LoRA the adapters alone (a PEFT folder: a few MB)."""
        if not self.weights_dir:
            raise NotImplementedError("openai engine: no weights_dir, so the server's weights cannot be updated; "
                                      "give a folder the server can read (grpo.weights_dir), or use the hf/vllm engine")
        path = os.path.abspath(os.path.join(self.weights_dir, f"v{self.weight_version + 1}"))
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        if hasattr(model, "peft_config"):
            model.save_pretrained(path)  # adapter_config.json + adapter_model.safetensors
        else:
            model.config.save_pretrained(path)
            save_state(model, os.path.join(path, "model.safetensors"))  # the tied head written out too
        return path

    def update_weights(self, model, path: str | None = None) -> None:
        """Have the server take `model`'s weights (written to `path`, or here: `write_weights`), within the push's
        deadline: a full model reloaded in place (see the module doc), LoRA adapters loaded by name at run time
        (vLLM's /v1/load_lora_adapter; `vllm serve --enable-lora` with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True),
        the requests then naming them. Past the deadline: RolloutError naming the server and the push."""
        t0 = time.perf_counter()
        path = path or self.write_weights(model)
        version = self.weight_version + 1
        deadline = push_deadline(model, self.push_timeout)
        doing = f"pushing weights v{version}"
        try:
            if hasattr(model, "peft_config"):
                name = f"{self.model}-lora-v{version}"
                self._post({"lora_name": name, "lora_path": path}, f"{self.base_url}/load_lora_adapter",
                           timeout=deadline, retries=0, doing=doing)
                if self.served != self.model:  # the adapters before: unloaded (best effort, they are stale anyway)
                    try:
                        self._post({"lora_name": self.served}, f"{self.base_url}/unload_lora_adapter", timeout=30,
                                   retries=0, doing=doing)
                    except RolloutError:
                        pass
                self.served = name
            else:
                self._post({"method": "reload_weights", "kwargs": {"weights_path": path}},
                           f"{self.admin_url}/collective_rpc", timeout=deadline, retries=0, doing=doing)
                self._post({}, f"{self.admin_url}/reset_prefix_cache", timeout=deadline, retries=0, doing=doing)
        except RolloutError as e:
            raise RolloutError(f"{e} (a weight push needs `vllm serve` started with VLLM_SERVER_DEV_MODE=1, or "
                               f"--enable-lora for adapters, and {path} readable by the server)") from None
        if self.weights_dir and os.path.dirname(path) == os.path.abspath(self.weights_dir):
            shutil.rmtree(os.path.join(self.weights_dir, f"v{self.weight_version}"), ignore_errors=True)
        self.weight_version = version
        self.last_push_s = time.perf_counter() - t0

    def _post(self, payload: dict, url: str | None = None, timeout: float | None = None, retries: int | None = None,
              doing: str = "sampling") -> dict:
        """POST with `retries` more tries (default the engine's) of `timeout` seconds each (default the engine's
        request timeout): each try has its deadline, so a server that stops answering ends the call in at most
        tries x timeout (+ backoff), never later. `doing` names the call in the error."""
        url = url or f"{self.base_url}/completions"
        timeout = self.timeout if timeout is None else timeout
        retries = self.retries if retries is None else retries
        data = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = ""
        for attempt in range(retries + 1):
            self.requests_sent += 1
            t0 = time.perf_counter()
            try:
                req = urllib.request.Request(url, data=data, headers=headers, method="POST")
                with urllib.request.urlopen(req, timeout=timeout) as resp:
                    raw = resp.read().decode()
                    self.busy_s += time.perf_counter() - t0
                    return json.loads(raw) if raw.strip() else {}
            except urllib.error.HTTPError as e:
                body = e.read().decode(errors="replace")[:300]
                if e.code < 500 and e.code != 429:
                    raise RolloutError(f"openai engine: {url} answered {e.code}: {body}") from None
                last = f"HTTP {e.code}: {body}"
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as e:
                last = f"{type(e).__name__}: {getattr(e, 'reason', e)}"
            self.busy_s += time.perf_counter() - t0
            if attempt < retries:
                self.retried += 1
                time.sleep(self.backoff * 2**attempt)
        raise RolloutError(f"openai engine: no answer from {url} after {retries + 1} tries of {timeout:.0f} s "
                           f"while {doing} (last error: {last})")

    def _ids(self, tokens: list[str]) -> list[int]:
        if all(t.startswith("token_id:") for t in tokens):
            return [int(t.split(":", 1)[1]) for t in tokens]
        if self.tokenizer is None:
            raise RolloutError("openai engine: the server returned token strings, not ids; pass tokenizer= "
                               "or serve with return_tokens_as_token_ids support (vLLM)")
        return list(self.tokenizer.convert_tokens_to_ids(tokens))

    def _one(self, row: PromptRow, n: int, s: SamplingConfig) -> Group:
        payload = {"model": self.served, "prompt": row.prompt, "n": n, "max_tokens": s.max_tokens,
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
        return Group(row.prompt_id, row.prompt, row.row, samples)

    def _continue(self, seq: Sequence[int], max_new: int, stops: Sequence[int], s: SamplingConfig,
                  seed: int | None) -> tuple[list[int], list[float]]:
        payload = {"model": self.served, "prompt": list(seq), "n": 1, "max_tokens": max_new,
                   "temperature": s.temperature, "top_p": s.top_p, "logprobs": 1, "return_tokens_as_token_ids": True,
                   "stop_token_ids": list(stops), "skip_special_tokens": False}
        if s.top_k:
            payload["top_k"] = s.top_k
        if seed is not None:
            payload["seed"] = seed
        choices = self._post(payload).get("choices") or [{}]
        lp = choices[0].get("logprobs") or {}
        tokens = lp.get("tokens")
        if not tokens and choices[0].get("text"):
            raise RolloutError("openai engine: the server answered a token-id prompt without token ids "
                               "(logprobs.tokens); multi-turn episodes need them (vLLM's return_tokens_as_token_ids)")
        ids, lps = self._ids(tokens or []), list(lp.get("token_logprobs") or [])
        if len(lps) != len(ids):
            raise RolloutError(f"openai engine: {len(ids)} token ids but {len(lps)} log-probs in one answer")
        return ids, lps

    def continue_ids(self, seqs: Sequence[Sequence[int]], max_new: int, stops: Sequence[int], sampling: SamplingConfig,
                     seeds: Sequence[int] | None = None, keys: Sequence | None = None
                     ) -> list[tuple[list[int], list[float]]]:
        """One segment after each token sequence (one request each, `max_concurrency` at a time): its ids up to and
        including the first of `stops` (or `max_new` of them) and their log-probs; `seeds[i]` seeds request i.
        `keys` (an episode's, for the hf engine's kept cache) are not needed: a server's prefix cache does that."""
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as ex:
            return list(ex.map(lambda i: self._continue(seqs[i], max_new, stops, sampling,
                                                        seeds[i] if seeds else None), range(len(seqs))))

    def generate(self, prompts: Sequence[PromptRow | dict | str], n: int, sampling: SamplingConfig) -> list[Group]:
        if n < 1:
            raise ValueError(f"generate: n must be >= 1, got {n}")
        if sampling.chat:
            raise ValueError("openai engine: chat=True needs a chat endpoint; apply the template to the prompt")
        rows = as_rows(prompts)
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as ex:
            return list(ex.map(lambda r: self._one(r, n, sampling), rows))
