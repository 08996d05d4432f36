"""`judge`: an LLM as judge, through any OpenAI-compatible chat endpoint or a local `transformers` model.

    from verifiers.judge import JudgeConfig, JudgeVerifier
    judge = JudgeVerifier(JudgeConfig(base_url="http://127.0.0.1:8000/v1", model="qwen-judge"))
    judge.verify("... the answer is 12", reference="12", prompt="What is 3*4?")
    verifiers.register(judge)   # then Reward/Term("judge") and the runtime use it like any verifier

Templates (`JudgeConfig.template`, or any string with {prompt} {completion} {reference}):
  correctness  reference-guided; the judge answers CORRECT or INCORRECT        (parse "verdict")
  pairwise     `reference` is the other response; the judge answers A or B      (parse "verdict": A = 1)
  rubric       `reference` is the rubric; the judge gives a score on `scale`     (parse "number")
Parsers: "verdict" (the last verdict word in `verdict_words`), "number" (the last number, normalised
from `scale` to [0, 1]), "json" (an object with a numeric "score" on `scale`).

Failure policy, explicit: a judge reply that does not parse is ABSTAIN with "UNPARSEABLE judge
output" in detail (masked: the judge failed, not the model); an endpoint that is unreachable or
keeps failing after `retries` (backoff doubling from `backoff_s`, on connection errors, 429 and
5xx) is ERROR. Neither is ever a score. Temperature 0 and a fixed seed by default, so verdicts are
deterministic and the runtime caches them (the key includes the judge's model, URL and template:
`config_key`). `verify_batch` runs `concurrency` requests at once under a token-bucket rate limit
(`rate_per_s`, burst `burst`) shared by the batch. Latency and token counts land in `metrics`.

Not here: streaming, logprob-based scores, and judges that need tools. HTTP is the standard
library's `urllib` (one POST per call; no client library to pin).
"""
from __future__ import annotations

import json
import os
import re
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Sequence

from reasoning_rl.types import Status, Verdict

from .base import Verifier, VerifierSpec

TEMPLATES = {
    "correctness": ("You are grading an answer against a reference.\nQuestion: {prompt}\nReference answer: {reference}\n"
                    "Answer to grade: {completion}\nIs the answer correct? Reply with exactly one word: "
                    "CORRECT or INCORRECT."),
    "pairwise": ("Two responses to the same question.\nQuestion: {prompt}\nResponse A: {completion}\n"
                 "Response B: {reference}\nWhich response is better? Reply with exactly one letter: A or B."),
    "rubric": ("Rate the response to the question by the rubric.\nQuestion: {prompt}\nRubric: {reference}\n"
               "Response: {completion}\nReply with 'Score: N' where N is a number from {lo} to {hi}."),
}
DEFAULT_PARSE = {"correctness": "verdict", "pairwise": "verdict", "rubric": "number"}
DEFAULT_WORDS = {"correctness": {"CORRECT": 1.0, "INCORRECT": 0.0}, "pairwise": {"A": 1.0, "B": 0.0}}


class JudgeUnavailable(RuntimeError):
    """The endpoint could not be reached or kept failing: the verdict is ERROR."""


@dataclass(frozen=True)
class JudgeConfig:
    base_url: str = ""                 # OpenAI-compatible server, e.g. http://host:8000/v1 ("" with backend="hf")
    model: str = ""                    # model name on the server, or a local path/name with backend="hf"
    backend: str = "openai"            # openai | hf
    api_key_env: str = "OPENAI_API_KEY"  # the key is read from this environment variable (never stored)
    template: str = "correctness"      # a TEMPLATES name or a format string
    parse: str = ""                    # verdict | number | json ("" = the template's default)
    verdict_words: dict = field(default_factory=dict)  # word -> score; {} = the template's default
    scale: tuple = (1.0, 10.0)         # range of "number"/"json" scores, normalised to [0, 1]
    pass_threshold: float = 0.5        # normalised score at or above which the status is CORRECT
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = 64
    timeout_s: float = 30.0            # per HTTP request
    retries: int = 3                   # extra attempts after a failure
    backoff_s: float = 0.5             # first retry delay, doubled each time
    concurrency: int = 8               # requests in flight in verify_batch
    rate_per_s: float = 0.0            # token-bucket refill (requests/s); 0 = unlimited
    burst: int = 1                     # token-bucket capacity

    def __post_init__(self) -> None:
        if self.backend not in ("openai", "hf"):
            raise ValueError(f"JudgeConfig.backend must be 'openai' or 'hf', got {self.backend!r}")
        if self.parse not in ("", "verdict", "number", "json"):
            raise ValueError(f"JudgeConfig.parse must be verdict, number or json, got {self.parse!r}")
        if self.template not in TEMPLATES and "{completion}" not in self.template:
            raise ValueError(f"JudgeConfig.template must be one of {sorted(TEMPLATES)} or a format string with "
                             f"{{completion}}, got {self.template[:60]!r}")
        lo, hi = self.scale
        if not lo < hi:
            raise ValueError(f"JudgeConfig.scale must be (low, high) with low < high, got {self.scale!r}")
        for name in ("concurrency", "burst"):
            if getattr(self, name) < 1:
                raise ValueError(f"JudgeConfig.{name} must be >= 1, got {getattr(self, name)!r}")


class TokenBucket:
    """`rate` tokens per second, at most `burst` banked; `take()` blocks until a token is free."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst, self.tokens, self.last = rate, burst, float(burst), time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> None:
        if self.rate <= 0:
            return
        while True:
            with self.lock:
                now = time.monotonic()
                self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
                self.last = now
                if self.tokens >= 1:
                    self.tokens -= 1
                    return
                wait = (1 - self.tokens) / self.rate
            time.sleep(wait)


def parse_judgement(text: str, mode: str, words: dict, scale: tuple) -> float | None:
    """The judge's reply as a score in [0, 1], or None when it does not parse."""
    lo, hi = scale
    if mode == "verdict":
        found = re.findall(r"\b(" + "|".join(sorted(map(re.escape, words), key=len, reverse=True)) + r")\b",
                           text.upper())
        return words[found[-1]] if found else None
    if mode == "json":
        m = re.search(r"\{.*\}", text, re.S)
        try:
            value = json.loads(m.group()) if m else None
        except ValueError:
            return None
        x = value.get("score") if isinstance(value, dict) else None
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not lo <= x <= hi:
            return None
        return (x - lo) / (hi - lo)
    nums = re.findall(r"-?\d+(?:\.\d+)?", text)
    if not nums:
        return None
    x = float(nums[-1])
    return (x - lo) / (hi - lo) if lo <= x <= hi else None


class JudgeVerifier(Verifier):
    name = "judge"
    version = "1"
    spec = VerifierSpec(needs=("reference", "prompt", "judge"), output_range=(0.0, 1.0), deterministic=True,
                        default_timeout=120.0, description="an LLM judge (OpenAI-compatible endpoint or local model)")

    def __init__(self, config: JudgeConfig | None = None, name: str = "judge") -> None:
        self.config = config or JudgeConfig(base_url=os.environ.get("REASONING_RL_JUDGE_URL", ""),
                                            model=os.environ.get("REASONING_RL_JUDGE_MODEL", ""))
        self.name = name
        self._bucket = TokenBucket(self.config.rate_per_s, self.config.burst)
        self._local = None
        self.requests_sent = 0

    def __getstate__(self):  # sent to verifier workers: no lock, no loaded model
        state = dict(self.__dict__)
        state["_bucket"], state["_local"] = None, None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._bucket = TokenBucket(self.config.rate_per_s, self.config.burst)

    def config_key(self) -> str:
        c = self.config
        return json.dumps([c.backend, c.base_url, c.model, c.template, c.parse, c.verdict_words, list(c.scale),
                           c.temperature, c.seed, c.max_tokens], sort_keys=True)

    # -- the judge call ----------------------------------------------------------------------
    def _render(self, completion: str, reference: Any, prompt: str) -> str:
        c = self.config
        template = TEMPLATES.get(c.template, c.template)
        return template.format(prompt=prompt, completion=completion, reference="" if reference is None else reference,
                               lo=c.scale[0], hi=c.scale[1])

    def _ask_openai(self, text: str) -> tuple[str, dict]:
        c = self.config
        if not c.base_url or not c.model:
            raise ValueError("judge: JudgeConfig.base_url and .model must be set for backend 'openai' "
                             "(or REASONING_RL_JUDGE_URL / REASONING_RL_JUDGE_MODEL)")
        body = json.dumps({"model": c.model, "messages": [{"role": "user", "content": text}],
                           "temperature": c.temperature, "seed": c.seed, "max_tokens": c.max_tokens}).encode()
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(c.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        url = c.base_url.rstrip("/") + "/chat/completions"
        delay, last = c.backoff_s, ""
        for attempt in range(c.retries + 1):
            self._bucket.take()
            self.requests_sent += 1
            try:
                req = urllib.request.Request(url, data=body, headers=headers, method="POST")
                with urllib.request.urlopen(req, timeout=c.timeout_s) as resp:
                    reply = json.loads(resp.read().decode())
                return reply["choices"][0]["message"]["content"] or "", reply.get("usage") or {}
            except urllib.error.HTTPError as e:
                last = f"HTTP {e.code}"
                if e.code != 429 and e.code < 500:
                    raise JudgeUnavailable(f"judge endpoint refused the request: {last}") from None
            except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError, TypeError) as e:
                last = f"{type(e).__name__}: {e}"
            if attempt < c.retries:
                time.sleep(delay)
                delay *= 2
        raise JudgeUnavailable(f"judge endpoint {url} failed {c.retries + 1} times (last: {last})")

    def _ask_hf(self, text: str) -> tuple[str, dict]:
        from .model_backends import generate_reply, load_causal_lm

        if self._local is None:
            self._local = load_causal_lm(self.config.model)
        model, tok = self._local
        return generate_reply(model, tok, text, self.config.max_tokens, self.config.temperature, self.config.seed)

    def verify(self, completion: str, reference: Any = None, prompt: str = "", **options: Any) -> Verdict:
        if options:
            raise ValueError(f"judge: unknown option {next(iter(options))!r}; valid: ['prompt', 'timeout']")
        c = self.config
        t0 = time.perf_counter()
        try:
            reply, usage = (self._ask_hf if c.backend == "hf" else self._ask_openai)(self._render(completion, reference, prompt))
        except JudgeUnavailable as e:
            return Verdict.masked_as(Status.ERROR, str(e), latency_s=time.perf_counter() - t0)
        metrics = {"latency_s": time.perf_counter() - t0, "prompt_tokens": float(usage.get("prompt_tokens", 0)),
                   "completion_tokens": float(usage.get("completion_tokens", 0))}
        mode = c.parse or DEFAULT_PARSE.get(c.template, "verdict")
        words = c.verdict_words or DEFAULT_WORDS.get(c.template, DEFAULT_WORDS["correctness"])
        score = parse_judgement(reply, mode, words, tuple(c.scale))
        if score is None:
            return Verdict.masked_as(Status.ABSTAIN, f"UNPARSEABLE judge output ({mode}): {reply[:120]!r}", **metrics)
        status = Status.CORRECT if score >= c.pass_threshold else Status.INCORRECT
        return Verdict(status, score, f"judge said {reply.strip()[:80]!r}", metrics)

    def verify_batch(self, completions: Sequence[str], references: Sequence[Any], **options: Any) -> list[Verdict]:
        """Up to `concurrency` judge calls in flight, all under this judge's token bucket."""
        if len(completions) != len(references):
            raise ValueError(f"verify_batch: {len(completions)} completions but {len(references)} references")
        prompts = options.pop("prompts", None) or [""] * len(completions)
        with ThreadPoolExecutor(self.config.concurrency) as ex:
            return list(ex.map(lambda a: self.verify(a[0], a[1], prompt=a[2], **options),
                               zip(completions, references, prompts)))
