"""`generation.cpu_decode=auto` chooses by measurement (rollout/kernel_choice.py): fake timings in, choice out; the
choice is cached per machine and shape and read back without measuring; another machine measures again; a
measurement on a loaded machine is provisional (reused by runs that find the machine loaded, measured again on a
quiet one); the union of the kernels that win alone and its neighbours are timed beside eager and the best of them
alone; a real measurement on a small llama times eager and each kernel and leaves the run's random stream as it
was."""
from __future__ import annotations

import os

import pytest
import torch

from reasoning_rl.rollout import cpu_kernels, kernel_choice
from reasoning_rl.rollout.cpu_kernels import Kernels as K

from .helpers.hf_model import build_hf_model

BUSY = kernel_choice._busy  # the real check (the fixtures replace it)
Measured = kernel_choice.Measured
E = K(False, False, False)
ALL = K(True, True, True, True, True)  # every kernel, the fused step included (the small llama can run it)
FOUR = K(True, True, True, True)  # every kernel but the fused step (a model it cannot run)
B = K(False, False, False, True)  # the KV buffer alone
# (timings of the combinations measured, the choice): seconds for the same rollout
CHOICES = [
    ({E: 1.00, K(True, False, False): 0.80, K(False, True, False): 0.90, K(True, True, True): 0.70}, K(True, True, True)),
    ({E: 1.00, K(True, False, False): 0.99, K(False, True, False): 0.985}, E),  # within the 3% of noise: eager
    ({E: 1.00, K(True, False, False): 1.30, K(False, True, False): 0.82, K(True, True, False): 1.10}, K(False, True, False)),
    ({E: 1.00, K(True, True, False): 0.80, K(False, True, False): 0.80}, K(False, True, False)),  # a tie: fewer kernels
    ({K(True, True, True): 0.10}, E),  # eager never measured: nothing to compare with
    ({}, E),
    ({E: 1.00, K(True, True, True): 1.50}, E),  # every kernel slower (the other Xeon): eager
]


@pytest.mark.parametrize("timings,choice", CHOICES, ids=range(len(CHOICES)))
def test_auto_takes_the_fastest_or_eager_within_noise(timings, choice):
    assert kernel_choice.choose(timings) == choice


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    from transformers import AutoModelForCausalLM

    folder = build_hf_model(tmp_path_factory.mktemp("llama"), [f"{a} plus {b} is {a + b}." for a in range(20)
                                                                for b in range(20)], vocab_size=400, arch="llama")
    return AutoModelForCausalLM.from_pretrained(folder).eval()


@pytest.fixture
def measured_model(llama, monkeypatch, tmp_path):
    """The small llama as if above auto's size floor, with an empty disk cache and memo."""
    monkeypatch.setattr(cpu_kernels, "AUTO_MIN_PARAMS", 1)
    monkeypatch.setenv("REASONING_RL_CACHE", str(tmp_path))
    monkeypatch.setattr(kernel_choice, "_MEMO", {})
    monkeypatch.setattr(kernel_choice, "_busy", lambda: "")  # a quiet machine, whatever else runs beside the tests
    return llama


@pytest.mark.usefixtures("unforced")  # auto's own choice: never forced (tests/machine_as)
def test_auto_runs_what_the_measurement_says_and_caches_it_per_machine(measured_model, monkeypatch, tmp_path):
    calls = []

    def fake(model, rows, possible, decoding_with):
        calls.append(rows)
        return Measured({E: 1.0, K(False, True, True): 0.6, K(True, True, True): 0.9}, 0.0)

    monkeypatch.setattr(kernel_choice, "measure", fake)
    assert cpu_kernels.resolve("auto", measured_model, rows=24) == K(False, True, True)
    assert calls == [32]  # measured once, at the rows rounded up to a power of two
    files = list((tmp_path / "kernels").glob("*.json"))
    assert len(files) == 1
    # a new process (empty memo) on the same machine reads the cache and measures nothing
    monkeypatch.setattr(kernel_choice, "_MEMO", {})
    monkeypatch.setattr(kernel_choice, "measure", lambda *a, **k: pytest.fail("measured again"))
    got = kernel_choice.chosen(measured_model, 24, ALL, cpu_kernels.decoding_with)
    assert got.kernels == K(False, True, True) and got.cached
    assert "draw+attention, measured on this machine at 32 rows (from the cache)" in got.describe()
    assert "eager 1.00" in got.describe() and "draw+attention 0.60" in got.describe()
    # another machine (another fingerprint) does not trust this one's timings
    monkeypatch.setattr(kernel_choice, "_MEMO", {})
    monkeypatch.setattr(kernel_choice, "fingerprint", lambda: {"cpu": "another processor"})
    monkeypatch.setattr(kernel_choice, "measure", fake)
    assert kernel_choice.chosen(measured_model, 24, ALL, cpu_kernels.decoding_with).cached is False and calls == [32, 32]
    # explicit settings never measure
    monkeypatch.setattr(kernel_choice, "measure", lambda *a, **k: pytest.fail("measured for an explicit setting"))
    assert cpu_kernels.resolve("packed", measured_model) == ALL
    assert cpu_kernels.resolve("eager", measured_model) == E


def test_an_unreadable_cache_file_is_measured_again(measured_model, monkeypatch, tmp_path):
    monkeypatch.setattr(kernel_choice, "measure", lambda *a, **k: Measured({E: 1.0, K(True, False, False): 0.5}, 0.0))
    kernel_choice.chosen(measured_model, 8, ALL, cpu_kernels.decoding_with)
    (path,) = (tmp_path / "kernels").glob("*.json")
    path.write_text("{not json")
    monkeypatch.setattr(kernel_choice, "_MEMO", {})
    monkeypatch.setattr(kernel_choice, "measure", lambda *a, **k: Measured({E: 1.0, K(False, True, False): 0.5}, 0.0))
    assert kernel_choice.chosen(measured_model, 8, ALL, cpu_kernels.decoding_with).kernels == K(False, True, False)


def test_a_real_measurement_times_eager_and_each_kernel_and_draws_nothing_from_the_run(measured_model):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    timings, spread = kernel_choice.measure(measured_model, 4, ALL, cpu_kernels.decoding_with)
    assert torch.equal(torch.rand(3), expected)  # the measurement's draws are not the run's
    assert set(timings) >= {E, *kernel_choice.SINGLES} and all(0 < t < 60 for t in timings.values())
    assert len(timings) <= 12  # eager, the five single kernels, the union of those that won and its neighbours
    assert kernel_choice.choose(timings) in timings
    assert not measured_model.training


def test_the_timed_steps_decode_after_context_positions_already_cached(measured_model, monkeypatch):
    """What is timed is a rollout's decode steps at a realistic length of cache (the decode attention's gain grows
    with it): one token per row after CONTEXT cached positions, not a short prompt's pass."""
    from reasoning_rl.rollout import decode

    timed, layers, real = [], [], decode.sample_kept

    def spy(model, input_ids, attention_mask, max_tokens, eos_id, *a, past=None, **k):
        timed.append((tuple(input_ids.shape), None if past is None else tuple(past[1].shape), max_tokens))
        layers.append(None if past is None else type(past[0].layers[0]).__name__)
        return real(model, input_ids, attention_mask, max_tokens, eos_id, *a, past=past, **k)

    monkeypatch.setattr(decode, "sample_kept", spy)
    kernel_choice._timed(measured_model, 4, [E, K(False, True, False), B], cpu_kernels.decoding_with)
    setup, *rollouts = timed
    assert setup == ((1, kernel_choice.CONTEXT), None, 1)  # the cached positions, run once
    assert len(rollouts) == 3 * (kernel_choice.ROUNDS + 1)
    assert all(ids == (4, 1) and past == (4, kernel_choice.CONTEXT) for ids, past, _ in rollouts)
    steps = [kernel_choice.WARM_STEPS] * 3 + [kernel_choice.STEPS] * 3 * kernel_choice.ROUNDS  # round 0 warms up
    # the buffer's cache is buffered before the clock, as a rollout's is from its prompt's pass on
    assert layers[1:] == ["DynamicLayer", "DynamicLayer", "BufferedLayer"] * (kernel_choice.ROUNDS + 1)
    assert [n for *_, n in rollouts] == steps


P, D, A = K(True, False, False), K(False, True, False), K(False, False, True)  # packed, draw, attention alone
PD, PDA, PDB = K(True, True, False), K(True, True, True), K(True, True, False, True)
# (each kernel alone's time against eager's 1.0 in the first phase (the buffer's 1.0: no gain, unless given); the
#  second phase's times, eager's 1.02 (the machine a little slower then) and the best single kernel's included, or None
#  when no second phase is due; the choice)
PHASES = [
    # two winners: their union, and the union plus each kernel that lost alone (attention, buffer)
    ({P: 0.9, D: 0.8, A: 0.99}, {E: 1.02, D: 0.81, PD: 0.6, PDA: 0.62, PDB: 0.65}, PD),
    # three winners: every pair and the three together, and the three plus the buffer; here the three win
    ({P: 0.9, D: 0.8, A: 0.7}, {E: 1.02, A: 0.71, PD: 0.75, K(True, False, True): 0.65, K(False, True, True): 0.6,
                                PDA: 0.5, FOUR: 0.55}, PDA),
    # machine D (AMD EPYC, docs/results.md): all three together lost to packed alone, packed + draw beat both
    ({P: 0.79, D: 0.84, A: 0.93}, {E: 1.02, P: 0.80, PD: 0.68, K(True, False, True): 0.82, K(False, True, True): 0.80,
                                   PDA: 0.85, FOUR: 0.86}, PD),
    # machine E (docs/results.md): the attention gains nothing alone and beats sdpa on the buffer's strided cache
    ({P: 0.91, D: 0.80, A: 0.99, B: 0.91}, {E: 1.0, D: 0.80, PDB: 0.657, PD: 0.75, K(True, False, False, True): 0.85,
                                           K(False, True, False, True): 0.80, FOUR: 0.623}, FOUR),
    # the combination's gain was the load's: timed beside the best single in one phase, the single wins
    ({P: 0.8, D: 0.9, A: 1.1}, {E: 1.02, P: 0.81, PD: 0.83, PDA: 0.85, PDB: 0.84}, P),
    # one winner: it and each loser beside it
    ({P: 1.1, D: 0.8, A: 0.98}, {E: 1.02, D: 0.81, PD: 0.83, K(False, True, True): 0.82,
                                 K(False, True, False, True): 0.84}, D),
    ({P: 1.1, D: 1.0, A: 1.2}, None, E),  # none: no second phase
    # two within noise of eager: one winner, and with the buffer beside it faster still
    ({P: 0.98, D: 0.975, A: 0.5}, {E: 1.0, A: 0.5, K(True, False, True): 0.52, K(False, True, True): 0.49,
                                   K(False, False, True, True): 0.45}, K(False, False, True, True)),
    # four winners: their union and the union less each one (not the six pairs), beside eager and the best single
    ({P: 0.9, D: 0.8, A: 0.95, B: 0.93}, {E: 1.0, D: 0.8, FOUR: 0.6, K(False, True, True, True): 0.7,
                                           K(True, False, True, True): 0.8, PDB: 0.55, PDA: 0.62}, PDB),
]


S = K(False, False, False, False, True)  # the fused step alone
DBS, BS, DS = K(False, True, False, True, True), K(False, False, False, True, True), K(False, True, False, False, True)
# the same, where the fused step can run the model (five kernels)
PHASES_STEP = [
    # machine E with the step (docs/results.md): four winners. Beside the step, packed and attention change no
    # decode step, so the union (packed + draw + buffer + step), the union plus attention and the union less packed
    # are one combination, draw + buffer + step, timed once; less draw or less buffer, the step with the other;
    # less the step, packed + draw + buffer
    ({P: 0.91, D: 0.80, A: 0.99, B: 0.91, S: 0.75}, {E: 1.0, S: 0.75, DBS: 0.58, BS: 0.70, DS: 0.62, PDB: 0.66}, DBS),
    # the step the only winner: it beside each other kernel; beside packed or attention it is the step alone
    ({P: 1.1, D: 1.0, A: 1.0, S: 0.8}, {E: 1.02, S: 0.81, DS: 0.78, BS: 0.83}, DS),
]


# (a combination, as a rollout runs it): beside the fused step, packed and attention change no decode step
EFFECTIVE = [
    (ALL, DBS),  # all five: the step's own products and attention serve every decode step
    (K(True, False, True, False, True), S),  # packed + attention + step: the step alone
    (DS, DS),  # nothing to drop
    (K(True, True, True, True, False), K(True, True, True, True, False)),  # no step: each kernel has its part
    (E, E),
]


@pytest.mark.parametrize("kernels, runs", EFFECTIVE)
def test_a_combination_with_the_step_runs_without_packed_and_attention(kernels, runs):
    assert kernel_choice.effective(kernels) == runs


@pytest.mark.parametrize("possible, alone, second, choice", [(FOUR, *p) for p in PHASES] +
                         [(ALL, *p) for p in PHASES_STEP])
def test_the_winners_union_and_its_neighbours_are_timed_beside_eager_and_the_best_single(monkeypatch, possible, alone,
                                                                                          second, choice):
    """Eager and each kernel alone are timed first; where one or more beat eager by more than MARGIN, their union,
    the union less each one (with three winners, every combination of them) and the union plus each kernel that lost
    alone are timed in a second phase beside eager and the best of them alone, and the first phase's other times are
    put on that phase's scale (eager 1.0 -> 1.02). A kernel that is not possible (the fused step on a model it
    cannot run) is never timed."""
    calls = []

    def fake(model, rows, combos, decoding_with):
        calls.append(list(combos))
        times = {**{k: 1.0 for k in combos}, **alone} if len(calls) == 1 else {k: second[k] for k in combos}
        return {k: (t,) for k, t in times.items()}  # one round each; a kernel not in `alone`: no gain

    monkeypatch.setattr(kernel_choice, "_timed", fake)
    timings, _ = kernel_choice.measure(None, 8, possible, None)
    singles = [k for k in kernel_choice.SINGLES if possible.step or not k.step]
    assert calls[0] == [E, *singles]
    assert kernel_choice.choose(timings) == choice
    first = {**{k: 1.0 for k in calls[0]}, **alone}
    if second is None:
        assert len(calls) == 1 and timings == first
        return
    assert len(calls) == 2 and sorted(calls[1]) == sorted(second)  # eager, the best single, the union, neighbours
    assert timings == pytest.approx({**{k: t * second[E] for k, t in first.items()}, **second})


def _cache_files(tmp_path) -> list[str]:
    folder = tmp_path / "kernels"
    return sorted(p.name.split(".", 1)[1] for p in folder.iterdir()) if folder.exists() else []


def test_a_measurement_on_a_loaded_machine_is_provisional_reused_loaded_and_measured_again_quiet(
        measured_model, monkeypatch, tmp_path):
    """Measured under load, the choice is used and kept apart from the cache; a later run on the machine still
    loaded reuses it without measuring (two ranks on one machine, the tests on a worker per core); a run on a quiet
    machine measures again, caches, and no run reads the provisional one after that."""
    cores = len(os.sched_getaffinity(0))
    loaded = lambda: BUSY(lambda: cores + 2.0)  # noqa: E731 (two other processes running)
    monkeypatch.setattr(kernel_choice, "_busy", loaded)
    monkeypatch.setattr(kernel_choice, "measure", lambda *a, **k: Measured({E: 1.0, D: 0.5}, 0.0))
    got = kernel_choice.chosen(measured_model, 8, ALL, cpu_kernels.decoding_with)
    assert got.kernels == D and not got.cached
    assert f"(just now); time vs eager: draw 0.50, eager 1.00; the machine's load average is {cores + 2.0:.1f} on " \
           f"{cores} cores: kept apart from the cache" in got.describe()
    assert _cache_files(tmp_path) == ["loaded.json"]
    # a later run, the machine still loaded: the provisional choice, no measurement
    monkeypatch.setattr(kernel_choice, "_MEMO", {})
    monkeypatch.setattr(kernel_choice, "measure", lambda *a, **k: pytest.fail("measured again under load"))
    got = kernel_choice.chosen(measured_model, 8, ALL, cpu_kernels.decoding_with)
    assert got.kernels == D and got.cached and got.busy
    assert "(from a measurement on a loaded machine, reused: the machine's load average is" in got.describe()
    # a later run on a quiet machine measures again, and caches what it finds
    monkeypatch.setattr(kernel_choice, "_MEMO", {})
    monkeypatch.setattr(kernel_choice, "_busy", lambda: "")
    monkeypatch.setattr(kernel_choice, "measure", lambda *a, **k: Measured({E: 1.0, P: 0.6, D: 0.7}, 0.0))
    got = kernel_choice.chosen(measured_model, 8, ALL, cpu_kernels.decoding_with)
    assert got.kernels == P and not got.cached and not got.busy
    assert _cache_files(tmp_path) == ["json", "loaded.json"]
    # from then on the cache decides, loaded or not
    monkeypatch.setattr(kernel_choice, "_MEMO", {})
    monkeypatch.setattr(kernel_choice, "_busy", loaded)
    monkeypatch.setattr(kernel_choice, "measure", lambda *a, **k: pytest.fail("measured with a cached choice"))
    got = kernel_choice.chosen(measured_model, 8, ALL, cpu_kernels.decoding_with)
    assert got.kernels == P and got.cached and not got.busy and "(from the cache)" in got.describe()


def test_a_measurement_whose_rounds_disagree_is_provisional(measured_model, monkeypatch, tmp_path):
    """The load average lags by a minute: a process that starts during the measurement shows only as rounds of one
    combination that disagree (here eager's second round 90% slower, as when a 2-thread process starts beside it)."""
    monkeypatch.setattr(kernel_choice, "_timed", lambda m, r, combos, d: {E: (1.0, 1.9), D: (0.8, 0.82),
                                                                          A: (1.1, 1.1), P: (0.99, 1.0),
                                                                          B: (1.0, 1.01)})
    timings, spread = kernel_choice.measure(None, 8, FOUR, None)
    assert timings == {E: 1.0, D: 0.8, A: 1.1, P: 0.99, B: 1.0} and spread == pytest.approx(0.9)
    monkeypatch.setattr(kernel_choice, "measure", lambda *a, **k: Measured({E: 1.0, D: 0.5}, 0.9))
    got = kernel_choice.chosen(measured_model, 8, ALL, cpu_kernels.decoding_with)
    assert got.kernels == D and "differed by 90%" in got.describe()
    assert _cache_files(tmp_path) == ["loaded.json"]
    monkeypatch.setattr(kernel_choice, "_MEMO", {})  # the machine quiet: measured again; its own noise (D: up to
    monkeypatch.setattr(kernel_choice, "measure", lambda *a, **k: Measured({E: 1.0, D: 0.5}, 0.3))  # 30%) cached
    assert kernel_choice.chosen(measured_model, 8, ALL, cpu_kernels.decoding_with).busy == ""
    assert _cache_files(tmp_path) == ["json", "loaded.json"]


@pytest.mark.parametrize("load, busy", [(0.5, False), (1.0, False), (64.0, True)])
def test_busy_means_a_load_average_above_the_usable_cores(load, busy):
    cores = len(os.sched_getaffinity(0))
    assert bool(BUSY(lambda: load * cores)) is busy


def test_without_onednn_packing_is_not_timed(monkeypatch):
    seen = []
    monkeypatch.setattr(kernel_choice, "_timed",
                        lambda m, r, combos, d: seen.append(combos) or {c: (1.0,) for c in combos})
    kernel_choice.measure(None, 8, K(False, True, True), None)
    assert seen == [[E, K(False, True, False), K(False, False, True)]]
