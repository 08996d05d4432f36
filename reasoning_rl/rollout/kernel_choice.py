"""`generation.cpu_decode=auto`: the CPU decode kernels chosen by measuring them, on this machine and the model's
own shapes, once.

The same kernels (cpu_kernels.py: prepacked oneDNN products, one uniform draw per token, the decode attention;
kv_buffer.py: keys and values written in place, not concatenated; fused_step.py: a Llama-family decode step as a
dozen operations on fused weights, where the model is one it can run) gained 2.07x on one 2-core Xeon and nothing on
another of the same family (docs/results.md); a rule written from the model's size and dtype cannot know which
machine it is on. So `auto` times a short rollout of the model itself (`STEPS` decode steps after `CONTEXT` cached
positions, every row alive) under eager PyTorch and each kernel alone, `ROUNDS` times interleaved, then the union of
the kernels that won and its neighbours (the union less one of them, or plus one that lost alone), beside eager and
the best kernel alone (their savings mostly add up: each replaces its own part of a step), takes each combination's
best time, and keeps the fastest, or eager when none beats it by more than `MARGIN` (noise): never slower than
eager by more than noise, wherever it runs. On SmolLM2-135M this costs some tens of seconds once per machine and
shape (docs/results.md). A
measurement made while other processes load the machine (load average above its usable cores), or whose rounds of
one combination disagree by more than `NOISE` (a process started during it: the load average lags by a minute), is
used by that run and kept apart from the cache, as provisional: a later run that finds the machine loaded too
reuses it (measuring again under load would rank the kernels by the load as much, and cost each run its seconds
again: two ranks of a launched run on one machine, or the tests on a worker per core), and a run that finds the
machine quiet measures again and caches what it finds.

    timings, spread = measure(model, rows, possible, decoding_with)   # {Kernels: seconds}, eager included
    choice = choose(timings)                                  # pure: the fastest, or eager within MARGIN
    chosen(model, rows, possible, decoding_with) -> Chosen    # once per process and shape; cached on disk

The disk cache is a JSON file per key under `<cache root>/kernels/` (REASONING_RL_CACHE; a provisional measurement
beside it, as `<key>.loaded.json`), the key being the machine's
fingerprint (models/machine.py: processor, flags, usable cores, torch, oneDNN, threads), `METHOD` (how the
measurement is made: a cache written by another method is measured again), the model's shape (layers,
widths, heads, vocabulary, dtype) and the rows rounded up to a power of two; it holds the timings, so a run's log can
say what the choice rests on. A model under `cpu_kernels.AUTO_MIN_PARAMS` parameters (the tiny model, the tests'
models) is not measured: its steps are Python overhead, and eager keeps its random stream.

Not here: the kernels themselves (cpu_kernels.py, which calls this with its `decoding_with`), GPU kernels (a GPU
run never uses these).
"""
from __future__ import annotations

import hashlib
import itertools
import json
import os
import time
from dataclasses import dataclass

from typing import NamedTuple

from ..models.device import machine_load
from ..models.machine import fingerprint
from ..models.sources import cache_root


class Kernels(NamedTuple):
    pack: bool  # linear weights prepacked for oneDNN (`cpu_kernels.packed_linears`)
    draw: bool  # one uniform per sampled token (`cpu_kernels.draw`) instead of torch.multinomial
    attend: bool  # a decode step's attention as two batched products (`cpu_kernels.decode_attention`), not sdpa's
    buffer: bool = False  # keys and values written into room kept in the cache (`kv_buffer.py`), not concatenated
    step: bool = False  # a Llama-family decode step as a dozen operations on fused weights (`fused_step.py`), not
    #                     the model's forward (with it on, `pack` and `attend` no longer touch a decode step)

MARGIN = 0.03  # a combination must beat eager by more than this share of eager's time to be chosen
STEPS = 6  # decode steps timed per rollout
WARM_STEPS = 2  # decode steps of the untimed first rollout of each combination
CONTEXT = 128  # positions already in each row's cache when the timed steps begin (a prompt and part of an answer)
ROUNDS = 2  # interleaved repetitions; the best of each combination counts
NOISE = 0.5  # a combination whose rounds differ by more than this share of the faster one: provisional (on a
#             quiet machine they differ by up to about 30%; a 2-thread process started beside us about doubles one)
METHOD = 9  # part of the cache key: 9 times a combination with the step without packed and attention (unused
#             beside it: `effective`); 8 adds the fused step (a fifth kernel) where the model can run it; 7 also
#             times the winners' union plus each kernel that lost alone (6 did not, and could miss the attention
#             beside the buffer); 6 packs weights in oneDNN's blocked layout, per shape
#             where that wins (5 copied them in their plain layout: to_mkldnn); 5 buffers the buffer's cache before
#             the clock (4 copied it in on the clock, in the first timed step: 1.00 of eager where a rollout gains
#             6%); 4 adds the KV buffer and times the winners' union and its neighbours; 3 every combination of at
#             most three winners after CONTEXT cached positions (2 after an 8-token prompt, whose attention was too
#             short for the decode attention's gain to show; 1 timed only all the winners)
N_KERNELS = len(Kernels._fields)
EAGER = Kernels(*(False,) * N_KERNELS)
CANDIDATES = tuple(Kernels(*bits) for bits in itertools.product((False, True), repeat=N_KERNELS))  # every combination
SINGLES = tuple(Kernels(*(i == j for j in range(N_KERNELS))) for i in range(N_KERNELS))  # each kernel alone
NAMES = ("packed", "draw", "attention", "buffer", "step")  # as the log and the benches name each kernel


def name_of(k: Kernels) -> str:
    """A combination as the log names it: its kernels joined by +, or eager."""
    return "+".join(n for n, on in zip(NAMES, k) if on) or "eager"


QUIET = "a run on a quiet machine measures again"  # what becomes of a provisional measurement (the log says so)


class Measured(NamedTuple):
    timings: dict  # {Kernels: best seconds for STEPS decode steps}
    spread: float  # the largest (slowest round / fastest round - 1) of any combination: 0 on a steady machine


@dataclass(frozen=True)
class Chosen:
    kernels: Kernels
    timings: dict  # {Kernels: seconds for STEPS decode steps of `rows` rows}
    rows: int
    cached: bool  # read from the disk cache (no measurement in this process)
    busy: str = ""  # why the timings are provisional: the load (or noise) they were measured under, or, reused from
    #                 a provisional measurement, the load now; "" for a measurement on a quiet machine

    def describe(self) -> str:
        """One log line: the choice, where its timings come from, and each combination's time against eager's."""
        eager = self.timings.get(EAGER)
        parts = [f"{name_of(k)} {t / eager:.2f}" for k, t in sorted(self.timings.items(), key=lambda kv: kv[1])] \
            if eager else []
        source, after = ("from the cache" if self.cached else "just now"), ""
        if self.busy and self.cached:
            source = f"from a measurement on a loaded machine, reused: {self.busy}; {QUIET}"
        elif self.busy:
            after = f"; {self.busy}: kept apart from the cache, for runs that find the machine loaded too; {QUIET}"
        return (f"cpu decode kernels (auto): {name_of(self.kernels)}, measured on this machine at {self.rows} rows "
                f"({source}); time vs eager: {', '.join(parts)}{after}")


def choose(timings: dict, margin: float = MARGIN) -> Kernels:
    """The fastest combination, or eager when none beats eager's time by more than `margin` of it (and when the
    combinations' times are not all there). Pure: fake timings in, choice out."""
    eager = timings.get(EAGER)
    if eager is None or not timings:
        return EAGER
    best = min(timings, key=lambda k: (timings[k], sum(k)))  # on a tie, fewer kernels changed
    return best if timings[best] < eager * (1 - margin) else EAGER


def measure(model, rows: int, possible: Kernels, decoding_with) -> Measured:
    """{combination: best seconds over ROUNDS} of a STEPS-step rollout of `rows` rows on `model`, each combination
    entered by `decoding_with(kernels, model)` (cpu_kernels'). The kernels replace separate parts of a decode step
    (the products, the draw, the attention, the cache's growth; the fused step the layers' small operations and
    fewer, larger products), so their savings mostly add up: eager
    and each kernel alone are timed first (interleaved); where one or more beat eager by more than MARGIN, the union
    of those winners and its neighbours (the union less one winner, where two or more remain: with three winners,
    every combination of them; the union plus one kernel that did not win alone, since two kernels can interact:
    the decode attention can gain nothing alone and much beside the KV buffer, whose strided cache slows
    sdpa down) are timed in a second phase, interleaved with eager and the best single kernel, so that the contest
    that decides (the best kernel alone against the combinations) is run within one phase: a machine whose load
    changed between the phases cannot tilt it. The first phase's other times are then put on the second phase's
    scale (times its eager's ratio). Eight rollouts a round at most; a combination with the fused step is timed as
    it runs (`effective`: without packed and attention, which it does not use). A kernel that is not `possible`
    here (no oneDNN) is left out. With the timings, the rounds' spread: a process that started or stopped during the
    measurement shows as rounds of one combination that disagree."""
    singles = [EAGER, *(k for k in SINGLES if all(p or not on for on, p in zip(k, possible)))]
    rounds = _timed(model, rows, singles, decoding_with)
    first = {k: min(ts) for k, ts in rounds.items()}
    winners = [k for k in singles[1:] if first[k] < first[EAGER] * (1 - MARGIN)]
    losers = [k for k in singles[1:] if k not in winners]
    if not winners or (len(winners) == 1 and not losers):
        return Measured(first, _spread(rounds))
    best_single = min(winners, key=first.get)
    groups = [winners, *(itertools.combinations(winners, len(winners) - 1) if len(winners) > 2 else ()),
              *([*winners, k] for k in losers)]
    combos = [effective(union(ws)) for ws in groups]
    combos = [k for k in dict.fromkeys(combos) if k not in (EAGER, best_single)]
    again = _timed(model, rows, [EAGER, best_single, *combos], decoding_with)
    second = {k: min(ts) for k, ts in again.items()}
    scale = second[EAGER] / first[EAGER]
    return Measured({**{k: t * scale for k, t in first.items()}, **second}, max(_spread(rounds), _spread(again)))


def union(kernels) -> Kernels:
    """The combination that runs every kernel any of `kernels` runs."""
    return Kernels(*(any(k[i] for k in kernels) for i in range(N_KERNELS)))


def effective(k: Kernels) -> Kernels:
    """`k` as a rollout runs it: with the fused step on, `pack` and `attend` touch no decode step (the step has its
    own products, packed per shape where that wins, and its own attention; a prompt's pass is longer than either
    serves), so they are dropped, and combinations that differ only there are timed once."""
    return k._replace(pack=False, attend=False) if k.step else k


def _spread(rounds: dict) -> float:
    """The largest disagreement between the rounds of one combination: max over k of max/min - 1."""
    return max((max(ts) / min(ts) - 1 for ts in rounds.values()), default=0.0)


def _timed(model, rows: int, combos: list, decoding_with) -> dict:
    """{combination: (seconds of each of ROUNDS interleaved rollouts)}, after one short untimed rollout of each (its
    first call pays one-time costs: oneDNN's kernels built, the weights packed). Each rollout decodes from a cache
    that already holds CONTEXT positions per row (one random row's, run through the model once, eager, outside the
    clock, then copied to every row), as a rollout's steps do after its prompt: the attention reads a realistic
    length, and no prompt's pass (not what these kernels are for) is on the clock."""
    import torch

    from . import decode, kv_buffer

    vocab = model.get_output_embeddings().weight.shape[0]
    g = torch.Generator().manual_seed(0)
    was_training = model.training
    model.eval()
    rng = torch.get_rng_state()
    try:
        prompt = torch.randint(0, vocab, (1, CONTEXT), generator=g)
        token, _, _, kept, _ = decode.sample_kept(model, prompt, torch.ones_like(prompt), 1, eos_id=-1, keep=True)
        nxt = token.expand(rows, 1).contiguous()  # (rows, 1): the token that follows the cached positions
        times: dict = {k: () for k in combos}
        for r in range(ROUNDS + 1):  # round 0 warms each path up and is not counted
            for k in combos:
                past = decode.continue_cache(model, kept * rows, [CONTEXT] * rows)  # a fresh (rows, CONTEXT) cache
                if k.buffer:  # a rollout's cache is buffered from its prompt's pass on: this copy is not a step's
                    kv_buffer.buffered(past[0], STEPS)
                # packing the weights happens on entering, outside the clock: once per rollout in a run, not per step
                with decoding_with(k, model, rows) as draw:
                    t0 = time.perf_counter()  # eos_id -1: no row ever ends
                    decode.sample_kept(model, nxt, torch.ones_like(nxt), STEPS if r else WARM_STEPS, eos_id=-1,
                                       past=past, draw=draw)
                    seconds = time.perf_counter() - t0
                if r:
                    times[k] += (seconds,)
        return times
    finally:
        torch.set_rng_state(rng)  # the measurement draws nothing from the run's random stream
        model.train(was_training)


def shape_key(model, rows: int) -> dict:
    c = model.config
    first = next(model.parameters())
    fields = ("model_type", "num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
              "num_key_value_heads", "vocab_size", "tie_word_embeddings")
    return {**{f: getattr(c, f, None) for f in fields}, "dtype": str(first.dtype), "rows": 1 << max(0, rows - 1)
            .bit_length(), "lora": hasattr(model, "peft_config")}


_MEMO: dict = {}  # (shape key) -> Chosen, this process's measurements


def chosen(model, rows: int, possible: Kernels, decoding_with, cache: bool = True) -> Chosen:
    """The combination `auto` runs `model` on: from this process's memo, else from the disk cache for this machine
    and shape, else (the machine loaded now) from a provisional measurement made on it loaded, else measured now
    (`measure(..., decoding_with)`) and written to the cache, or as provisional where the machine was loaded or
    the rounds disagreed."""
    shape = shape_key(model, rows)
    memo = json.dumps(shape, sort_keys=True)
    if memo in _MEMO:
        return _MEMO[memo]
    key = hashlib.sha256(json.dumps({"machine": fingerprint(), "shape": shape, "method": METHOD},
                                    sort_keys=True).encode()).hexdigest()
    path = os.path.join(cache_root(), "kernels", f"{key[:32]}.json")
    provisional = os.path.join(cache_root(), "kernels", f"{key[:32]}.loaded.json")
    timings = _read(path) if cache else None
    busy = _busy() if timings is None else ""
    if timings is None and cache and busy:
        timings = _read(provisional)  # measured on this machine loaded: it serves a run that finds it loaded too
    if timings is not None:
        result = Chosen(choose(timings), timings, shape["rows"], cached=True, busy=busy)
    else:
        timings, spread = measure(model, shape["rows"], possible, decoding_with)
        busy = busy or _noisy(spread)
        result = Chosen(choose(timings), timings, shape["rows"], cached=False, busy=busy)
        if cache:
            _write(provisional if busy else path, timings, shape)
    _MEMO[memo] = result
    return result


def _busy(load=None) -> str:
    """Why a measurement made now is provisional: other processes load the machine (the 1-minute load average
    above its usable cores), so the times may rank the kernels by the load, not by their speed; else ""."""
    busy, cores = machine_load(load)
    return f"the machine's load average is {busy:.1f} on {cores} cores" if busy > cores else ""


def _noisy(spread: float) -> str:
    """Why a measurement is provisional although the machine looked quiet when it began (the load average lags by
    a minute): the rounds of one combination disagreed by more than NOISE; else ""."""
    return (f"the rounds of one combination differed by {spread:.0%} (something else ran during the measurement)"
            if spread > NOISE else "")


def _read(path: str) -> dict | None:
    try:
        with open(path) as f:
            data = json.load(f)
        return {Kernels(*k): float(t) for k, t in data["timings"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent or unreadable: measure again


def _write(path: str, timings: dict, shape: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump({"machine": fingerprint(), "shape": shape, "timings": [[list(k), t] for k, t in timings.items()]},
                  f, indent=1)
    os.replace(tmp, path)
