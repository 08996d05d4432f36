"""Multi-turn episodes, token in and token out: the model and an environment take turns on one sequence of ids.

    run_episodes(model, tok, env, rows, sampling, limits, engine=None)     every row's episode, advancing together
    Episode.sample() -> Sample                                             token_ids, logprobs, loss_mask, turns
    EpisodeEngine(model, tok, env, limits, engine).generate(rows, n, sampling)   the loop's engine (grpo.environment)

One episode is one sequence: the prompt's ids, then each model segment exactly as sampled, then each observation
tokenized once and appended. Model tokens are never decoded and encoded again: what the trainer scores is what the
engine sampled (tests check the ids token for token). The loss mask is 1 on model tokens and 0 on observations;
the log-probabilities are the engine's for model tokens and 0.0 (masked) for observations.

Each turn, every live episode samples its next segment from its ids in one call of the engine's `continue_ids`:
the hf engine's batch (`rollout.decode.sample`; the default, on `model`), vLLM's token prompts, or an
OpenAI-compatible server given the ids (each request seeded apart, so a group's episodes differ); a segment ends
at the model's end of turn, at `generation.max_tokens`, or just after a complete tool call (the
environment's `call_end`: the tokens sampled past it are dropped, the ones kept are unchanged). Then the environment
answers every call of the turn at once (`respond`: the Python tool runs them concurrently on the sandbox pool).
An episode ends on a segment with no call (reason "answer"), on `max_turns` segments, on a call past
`max_tool_calls` (not run), or when its tokens after the prompt reach `max_episode_tokens` (reason "truncated",
finish_reason "length", and no further turn: a truncated episode never continues). A failure of the environment
itself (`Step.failed`) ends it and marks the sample for masking (`Episode.failure`).

Not here: the environment (rollout/environments.py), verification (the task's verifiers read `Sample.text`, the model's own
words: an answer a program printed counts only once the model writes it), the loss (trainers/grpo_batch.py).
On the hf engine each episode's KV cache is kept from one turn to the next (keyed by episode; freed when it ends),
so a turn runs only its new tokens through the model (`SamplingConfig.reuse_turn_cache`); vLLM's prefix cache does
the same on its engines.
Not here either: an environment's turns on the `worker` engine (refused).
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..types import Sample, Turn
from .environments import Environment, Step


@dataclass(frozen=True)
class EpisodeLimits:
    """An episode's bounds, and how its observations join it (`tool_format`: "text" or "chat")."""
    max_turns: int = 4  # model segments
    max_tool_calls: int = 3
    max_episode_tokens: int = 512  # tokens after the prompt: model and observation tokens together
    tool_format: str = "text"

    @classmethod
    def of(cls, rl) -> "EpisodeLimits":
        """The limits a run's `grpo` section sets."""
        return cls(rl.max_turns, rl.max_tool_calls, rl.max_episode_tokens, rl.tool_format)


@dataclass
class Episode:
    row: dict
    prompt_ids: list[int]
    ids: list[int] = field(default_factory=list)  # after the prompt
    logprobs: list[float] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)  # 1 on the model's tokens, 0 on the observations'
    texts: list[str] = field(default_factory=list)  # the model's segments
    turns: list[Turn] = field(default_factory=list)
    tool_calls: int = 0
    done: bool = False
    reason: str = ""
    truncated: bool = False
    failure: str = ""
    state: Any = None
    conv: list = field(default_factory=list)  # tool_format chat: the messages so far (the row's, then each turn's)

    def sample(self) -> Sample:
        return Sample("".join(self.texts), tuple(self.ids), tuple(self.logprobs),
                      "length" if self.truncated else "stop", loss_mask=tuple(self.loss_mask), turns=tuple(self.turns),
                      error=self.failure)

    def add(self, ids: Sequence[int], logprobs: Sequence[float] | None) -> None:
        """Append model tokens (with their log-probs) or, with logprobs None, observation tokens."""
        self.ids += list(ids)
        self.logprobs += list(logprobs) if logprobs is not None else [0.0] * len(ids)
        self.loss_mask += [1 if logprobs is not None else 0] * len(ids)


def _cut(tok, ids: list[int], end_char: int) -> int:
    """The fewest of `ids` whose decoded text reaches character `end_char` (where the tool call closes)."""
    for n in range(1, len(ids) + 1):
        if len(tok.decode(ids[:n], skip_special_tokens=False)) >= end_char:
            return n
    return len(ids)


def _template_ids(tok, messages: list, tools: list | None = None) -> list[int]:
    out = tok.apply_chat_template(messages, tools=tools or None, tokenize=True)
    return list(out["input_ids"] if hasattr(out, "keys") else out)


def _chat_observation(tok, e: Episode, observation: str) -> str:
    """tool_format chat: the text that follows the model's end of turn, as the template renders a tool message after
    the conversation so far: the rest of the assistant message's closing (ChatML's newline), the tool message, and
    the next assistant header. Tokenized once and appended; the final check says whether the splice held.

    Read off the template's rendering of the whole conversation with the tool message where that starts with what
    the episode holds; a template that renders the model's turn otherwise once it is no longer the last (Qwen3 drops
    an empty think block) is read off its rendering of the conversation before the tool message, and one that
    rewrites earlier turns off a one-turn conversation of its own (the turn's tool calls, then the tool message)."""
    tools = e.row.get("tools") or None  # the schemas the prompt was rendered with (Task.render)
    written = tok.decode(e.prompt_ids + e.ids, skip_special_tokens=False)
    after = tok.apply_chat_template(e.conv + [{"role": "tool", "content": observation}], tools=tools, tokenize=False,
                                    add_generation_prompt=True)
    if after.startswith(written):
        return after[len(written):]
    before = tok.apply_chat_template(e.conv, tools=tools, tokenize=False)
    if before.startswith(written) and after.startswith(before):
        return before[len(written):] + after[len(before):]
    dummy = [{"role": "user", "content": "x"}, dict(e.conv[-1])]
    head = tok.apply_chat_template(dummy, tools=tools, tokenize=False)
    full = tok.apply_chat_template(dummy + [{"role": "tool", "content": observation}], tools=tools, tokenize=False,
                                   add_generation_prompt=True)
    eos = tok.eos_token or ""
    head = head[:head.rfind(eos) + len(eos)] if eos and eos in head else head  # up to the turn's end, as sampled
    return full[len(head):] if full.startswith(head) else observation


def template_mismatch(tok, e: Episode) -> int | None:
    """None when the episode's ids (prompt + every turn) are a prefix of apply_chat_template of its whole
    conversation, token for token; else the first position where they differ (a sampled tokenization the template
    would not produce, or a template that rewrites earlier turns)."""
    from .base import common_prefix

    ours = e.prompt_ids + e.ids
    same = common_prefix(ours, _template_ids(tok, e.conv, e.row.get("tools")))
    return None if same == len(ours) else same


def _observe(tok, e: Episode, st: Step, chat: bool, max_episode_tokens: int) -> None:
    """The environment's answer joins episode `e`: the turn records the call and what came back; the observation's
    ids are appended once (the template's tool message in the chat format), unless the environment failed (the
    episode ends, to be masked) or there is no room left to answer after it (the episode ends truncated)."""
    e.tool_calls += st.tool_call
    e.turns[-1] = dataclasses.replace(e.turns[-1], call=st.call, observation=None if st.failed else st.observation,
                                      tool_s=round(st.seconds, 3), program_error=st.program_error,
                                      error=st.reason if st.failed else "")
    if st.failed:
        e.done, e.reason, e.failure = True, "environment failed", st.reason
        return
    said = _chat_observation(tok, e, st.observation) if chat else st.observation
    if chat:
        e.conv.append({"role": "tool", "content": st.observation})
    obs = tok(said, add_special_tokens=False)["input_ids"] if said else []
    if len(e.ids) + len(obs) >= max_episode_tokens:
        e.done, e.reason, e.truncated = True, "truncated", True  # no room to answer: a truncated episode
        return
    e.add(obs, None)
    if st.done:
        e.done, e.reason = True, st.reason or "environment ended"


def run_episodes(model, tok, env: Environment, rows: Sequence[dict], sampling, limits: EpisodeLimits,
                 stop_ids: Sequence[int] | None = None, engine=None) -> list[Episode]:
    """Every row's episode (row["prompt"] rendered as the prompt), all advancing together turn by turn. With
    limits.tool_format "chat" each row also carries its chat `messages` (the task keeps them when it renders with the
    chat template); a segment is a whole assistant turn, and the observation comes as the template's tool message.
    `engine` samples the segments (anything with `continue_ids`: the vllm and openai engines); None = `model` itself
    through the hf engine. `model` gives the end-of-turn ids unless `stop_ids` does (with an engine, `model` may then
    be None)."""
    import torch

    from ..errors import UserError
    from . import HFEngine
    from .base import stop_ids as default_stops

    chat = limits.tool_format == "chat"
    if chat and any("messages" not in r for r in rows):
        raise UserError("grpo.tool_format: value 'chat' needs prompts rendered with the chat template "
                        "(tasks.chat_template auto with a model that has one, or on)")
    stops = list(stop_ids or default_stops(model, tok))
    # the prompt's ids as the trainer's batch makes them (trainers/grpo_batch.py: tok(prompt), special tokens and all)
    eps = [Episode(dict(r), tok(r["prompt"])["input_ids"] or [stops[0]],
                   conv=[dict(m) for m in r["messages"]] if chat else []) for r in rows]
    for e in eps:
        e.state = env.start(e.row)
    if sampling.seed is not None:
        torch.manual_seed(sampling.seed)
    turns = _Turns(tok, env, engine or HFEngine(model, tok), sampling, limits, stops, eps)
    was_training = model is not None and model.training
    if model is not None:
        model.eval()
    try:
        for turn in range(limits.max_turns):
            live = [e for e in eps if not e.done]
            if not live:
                break
            turns.take(turn, live)
        for e in eps:
            if not e.done:
                e.done, e.reason = True, "max_turns"
            if chat:  # reported, never hidden: the trained ids are the sampled ones either way
                pos = template_mismatch(tok, e)
                if pos is not None:
                    e.turns[-1] = dataclasses.replace(e.turns[-1], template_mismatch=pos)
    finally:
        turns.forget(eps)
        if model is not None:
            model.train(was_training)
        for e in eps:
            env.close(e.state)
    return eps


class _Turns:
    """One call of `run_episodes`: its engine, environment and limits, and each episode's place (for its seed and
    the key of its kept cache on the hf engine)."""

    def __init__(self, tok, env: Environment, engine, sampling, limits: EpisodeLimits, stops: list[int],
                 eps: list[Episode]) -> None:
        self.tok, self.env, self.engine, self.sampling, self.limits, self.stops = tok, env, engine, sampling, \
            limits, stops
        self.chat = limits.tool_format == "chat"
        self.n = len(eps)
        self.order = {id(e): i for i, e in enumerate(eps)}  # each episode's own seed, turn after turn
        self.run = object()  # with order, each episode's key for the engine's kept cache (hf), unique to this call

    def key(self, e: Episode) -> tuple:
        return self.run, self.order[id(e)]

    def forget(self, eps: Sequence[Episode]) -> None:
        """Free the kept caches of these episodes (an ended one's, or every one's at the end)."""
        getattr(self.engine, "forget", lambda keys: None)([self.key(e) for e in eps])

    def take(self, turn: int, live: list[Episode]) -> None:
        """Every live episode samples its next segment (one engine call); then the environment answers the calls."""
        budget = [self.limits.max_episode_tokens - len(e.ids) for e in live]
        max_new = max(1, min(self.sampling.max_tokens, max(budget)))
        seed = self.sampling.seed
        seeds = None if seed is None else [seed + turn * self.n + self.order[id(e)] for e in live]
        t0 = time.time()
        sampling = self.sampling
        if self.env.CALL_STOPS and not self.chat:  # stop a segment once its call closes (engines that honour stop)
            sampling = dataclasses.replace(sampling, stop=tuple(sampling.stop) + tuple(self.env.CALL_STOPS))
        segs = self.engine.continue_ids([e.prompt_ids + e.ids for e in live], max_new, self.stops, sampling,
                                        seeds, keys=[self.key(e) for e in live])
        gen_s = time.time() - t0
        asking = [(e, text) for e, seg, room in zip(live, segs, budget)
                  if (text := self._segment(e, seg, room, gen_s)) is not None]
        if asking:
            steps: list[Step] = self.env.respond([e.state for e, _ in asking], [t for _, t in asking])
            for (e, _), st in zip(asking, steps):
                _observe(self.tok, e, st, self.chat, self.limits.max_episode_tokens)
        self.forget([e for e in live if e.done])  # an ended episode's kept cache

    def _segment(self, e: Episode, seg, room: int, gen_s: float) -> str | None:
        """Episode `e` takes its sampled segment (cut at its token budget, and after a complete tool call in the text
        format); returns the segment's text when it asks the environment, else None (the episode ended)."""
        tok, env = self.tok, self.env
        row_ids, row_lp = seg
        n = min(len(row_ids), room)
        seg_ids, seg_lp = row_ids[:n], row_lp[:n]
        ended = n > 0 and seg_ids[-1] in self.stops
        end = env.call_end(tok.decode(seg_ids, skip_special_tokens=False))
        if self.chat:  # a whole assistant turn; a call counts once the model has ended its turn
            end = end if ended else None
            # the environment says how the turn reads as a message: its text, or the template's structured tool call
            # (`tool_calls`), which the template then renders in its own way
            e.conv.append(env.assistant_message(tok.decode(seg_ids[:-1] if ended else seg_ids,
                                                           skip_special_tokens=False)))
        elif end is not None:  # keep the tokens up to the call's close; the rest were never part of the episode
            k = _cut(tok, seg_ids, end)
            seg_ids, seg_lp, ended = seg_ids[:k], seg_lp[:k], False
        text = tok.decode(seg_ids, skip_special_tokens=True)
        e.add(seg_ids, seg_lp)
        e.texts.append(text)
        e.turns.append(Turn(text, tuple(seg_ids), round(gen_s, 3), broken=end is None and env.opens_call(text)))
        if end is None:
            e.done, e.reason = True, "answer" if ended else "truncated"
            e.truncated = not ended
        elif e.tool_calls >= self.limits.max_tool_calls:
            e.done, e.reason = True, "max_tool_calls"
        else:
            return text
        return None


class EpisodeEngine:
    """The engines' interface (`generate(rows, n, sampling) -> groups`) with multi-turn samples: each prompt's n
    episodes, rendered as the hf engine renders prompts (the chat template when sampling.chat). `engine` (vllm or
    openai) samples the segments and gets the weight pushes; None = the hf engine on `model`."""

    def __init__(self, model, tokenizer, env: Environment, limits: EpisodeLimits, engine=None) -> None:
        self.model, self.tokenizer, self.env, self.limits, self.engine = model, tokenizer, env, limits, engine

    def generate(self, prompts, n: int, sampling) -> list:
        from .base import as_rows, render_prompt
        from ..types import Group

        rows = as_rows(prompts)
        eps = run_episodes(self.model, self.tokenizer, self.env,
                           [{"prompt_id": r.prompt_id, "prompt": render_prompt(self.tokenizer, r.prompt, sampling.chat),
                             **({"messages": r.row["messages"]} if "messages" in r.row else
                                {"messages": [{"role": "user", "content": r.prompt}]} if sampling.chat else {}),
                             **({"tools": r.row["tools"]} if "tools" in r.row else {})}
                            for r in rows for _ in range(n)], sampling, self.limits, engine=self.engine)
        return [Group(r.prompt_id, r.prompt, r.row, [e.sample() for e in eps[k * n:(k + 1) * n]])
                for k, r in enumerate(rows)]

    @classmethod
    def of(cls, rl, model, tokenizer, engine=None) -> "EpisodeEngine":
        """The engine a run's `grpo` section asks for: its environment (`grpo.environment`) and limits, its
        segments sampled by `engine` (None: hf on `model`)."""
        from .environments import ENVIRONMENTS

        return cls(model, tokenizer, ENVIRONMENTS.get(rl.environment).from_config(rl), EpisodeLimits.of(rl), engine)

    def update_weights(self, model) -> None:
        """hf samples from the very object being trained (nothing to push); another engine gets the weights."""
        if self.engine is not None:
            self.engine.update_weights(model)

    def close(self) -> None:
        getattr(self.env, "shutdown", lambda: None)()
        getattr(self.engine, "close", lambda: None)()


def episode_metrics(samples: Sequence[Sample]) -> dict[str, float]:
    """Per round, over multi-turn samples: tool calls per sample, the share of calls whose program failed, the share
    of samples whose environment failed (masked), of those that opened a call it could not read, turns per sample, truncated episodes, seconds in tools."""
    n = max(1, len(samples))
    turns = [t for s in samples for t in s.turns]
    calls = sum(bool(t.call) for t in turns)
    return {"tools/calls_per_sample": calls / n,
            "tools/program_error_rate": sum(t.program_error for t in turns) / max(1, calls),
            "tools/failure_rate": sum(bool(s.error) for s in samples) / n,
            "tools/broken_call": sum(any(t.broken for t in s.turns) for s in samples) / n,
            "tools/turns_per_sample": len(turns) / n,
            "tools/truncated": sum(s.truncated for s in samples) / n,
            "tools/template_mismatch": sum(any(t.template_mismatch is not None for t in s.turns)
                                           for s in samples) / n,
            "time/tools": sum(t.tool_s for t in turns)}
