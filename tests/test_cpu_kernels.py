"""The packed CPU kernels (rollout/cpu_kernels.py): the inverse-transform draw samples the distribution it is
given and never a token of probability 0, its two-level search lands where one running sum would, the decode
loop hands it the sampling distribution (temperature, top-p, top-k); prepacked
linear layers give the eager layers' outputs up to float rounding, only for a no-grad forward in the packing
thread, and leave the model as it was; the decode attention is sdpa's up to float rounding, serves only one-token
no-grad forwards of the entering thread, and puts the model back on sdpa; the engine on packed kernels keeps the
rollout contract (log-probs = the trainer's recomputation, a seed repeats)."""
from __future__ import annotations

import threading

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from reasoning_rl import config
from reasoning_rl.config.sections import Config
from reasoning_rl.models.load import build_tiny
from reasoning_rl.rollout import HFEngine, PromptRow, SamplingConfig, cpu_kernels, logprob_mismatch, packing

from .helpers.hf_model import build_hf_model


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = build_hf_model(tmp_path_factory.mktemp("llama"), [f"{a} plus {b} is {a + b}." for a in range(30)
                                                                for b in range(30)], vocab_size=500, arch="llama")
    return AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


def test_draw_follows_the_distribution_and_skips_zero_mass():
    probs = torch.tensor([[0.0, 0.5, 0.0, 0.3, 0.2, 0.0]]).repeat(40_000, 1)  # (b, V); rows need not sum to 1
    torch.manual_seed(0)
    got = cpu_kernels.draw(probs * 3.0)  # (b,)
    freq = torch.bincount(got, minlength=6).double() / len(got)
    assert freq[[0, 2, 5]].sum() == 0  # a token of probability 0 is never drawn
    sd = (probs[0].double() * (1 - probs[0].double()) / len(got)).sqrt()
    assert ((freq - probs[0].double()).abs() <= 5 * sd + 1e-12).all(), freq  # within 5 standard errors


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=40), st.floats(0.0, 1.0, exclude_max=True))
def test_draw_lands_on_a_token_with_mass_for_every_uniform(weights, u):
    """For any u in [0, 1), including the largest floats below 1, the drawn token has positive probability."""
    probs = torch.tensor([weights + [1e-3]])  # (1, V) with some mass
    real_rand = torch.rand
    for value in (u, 1.0 - 2.0 ** -24, 1.0 - 2.0 ** -53):  # the largest float32 and float64 below 1
        torch.rand = lambda *shape, **kw: torch.full(shape, value, dtype=kw.get("dtype"))  # noqa: B023
        try:
            i = int(cpu_kernels.draw(probs)[0])
        finally:
            torch.rand = real_rand
        assert 0 <= i < probs.shape[1] and probs[0, i] > 0, (value, i)


def test_draw_keeps_a_tail_token_its_own_width():
    """A token of probability 1e-9 beside two of about 0.5: the uniform that lands in its interval draws it (a
    float32 running sum would give it no width at all)."""
    probs = torch.tensor([[0.5, 1e-9, 0.5]])  # (1, V), float32 as the decode loop has them
    lo = float(probs[0, 0].double())
    total = float(probs.double().sum())
    real_rand = torch.rand
    try:
        for u, want in (((lo + 0.5e-9) / total, 1), ((lo - 1e-6) / total, 0), ((lo + 2e-9) / total, 2)):
            torch.rand = lambda *shape, **kw: torch.full(shape, u, dtype=kw.get("dtype"))  # noqa: B023
            assert int(cpu_kernels.draw(probs)[0]) == want, (u, want)
    finally:
        torch.rand = real_rand


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 300), st.integers(1, 40), st.lists(st.integers(0, 299), max_size=200),
       st.floats(0.0, 1.0, exclude_max=True), st.integers(0, 2**31 - 1))
def test_the_two_level_search_draws_what_one_running_sum_draws(V, block, zeros, u, seed):
    """For the same u, the block-then-token search returns the token the plain inverse transform over one float64
    running sum returns; whole blocks of zeros and a vocabulary that is not a multiple of the block included, and
    masses spread over 30 orders of magnitude, so that a block's sum and its running sum round apart."""
    g = torch.Generator().manual_seed(seed)
    probs = torch.exp(torch.randn(1, V, generator=g) * 16)  # (1, V)
    probs[0, [z for z in zeros if z < V]] = 0.0
    probs[0, seed % V] += 1e-3  # some mass
    cdf = probs.double().cumsum(-1)
    x = torch.minimum(torch.tensor([[u]], dtype=torch.float64) * cdf[:, -1:], torch.nextafter(cdf[:, -1:],
                                                                                                torch.zeros(1, 1)))
    want = int(torch.searchsorted(cdf, x, right=True)[0, 0])
    real_rand = torch.rand
    try:
        for top in (1.0 - 2.0 ** -24, 1.0 - 2.0 ** -53):  # the largest float32 and float64 below 1: a token with mass
            torch.rand = lambda *shape, **kw: torch.full(shape, top, dtype=kw.get("dtype"))  # noqa: B023
            assert probs[0, int(cpu_kernels.draw(probs, block=block)[0])] > 0, top
        torch.rand = lambda *shape, **kw: torch.full(shape, u, dtype=kw.get("dtype"))
        got = int(cpu_kernels.draw(probs, block=block)[0])
    finally:
        torch.rand = real_rand
    assert probs[0, got] > 0
    if got != want:  # only where u * total falls within rounding of the running total where the two tokens meet
        assert abs(float(cdf[0, min(got, want)]) - float(x[0, 0])) < 1e-12 * float(cdf[0, -1]), (got, want)


@pytest.mark.parametrize("temperature, top_p, top_k", [(1.0, 1.0, 0), (0.7, 1.0, 0), (1.0, 0.9, 0), (1.0, 1.0, 5)])
def test_the_decode_loop_hands_the_draw_the_sampling_distribution(llama, temperature, top_p, top_k):
    """decode.sample_kept gives `draw` weights in proportion to softmax(logits / T) (without truncation: exp of the
    log-probs it records, no second softmax), the truncated softmax with top-p or top-k; the recorded log-prob is
    that of the token drawn under the distribution handed to the draw (over the kept set where one was cut), and
    the floor returned lies halfway between the smallest kept logit / T and the largest cut."""
    from reasoning_rl.rollout import decode

    model, tok = llama
    enc = tok(["3 plus 4 is"], return_tensors="pt")
    seen = []

    def greedy(weights):  # (b, V) -> (b,): records what the loop hands a draw
        seen.append(weights.clone())
        return weights.argmax(-1)

    ids, logp, _, _, floors = decode.sample_kept(model, enc.input_ids, enc.attention_mask, 2, -1, temperature, top_p,
                                                 top_k, draw=greedy)
    with torch.no_grad():
        logits = model(torch.cat([enc.input_ids, ids[:, :1]], 1)).logits[0, -2:] / temperature  # (2, V): both steps
    kept = decode.truncate(logits, top_p, top_k)
    want = torch.softmax(kept, -1)
    got = torch.cat(seen)  # (2, V)
    assert torch.allclose(got / got.sum(-1, keepdim=True), want, atol=1e-6), (got - want).abs().max()
    assert ((got == 0) == (want == 0)).all()  # truncated tokens get no weight at all
    assert torch.allclose(logp[0], torch.log_softmax(kept, -1).gather(-1, ids[0, :, None]).squeeze(-1), atol=1e-5)
    if top_p < 1 or top_k:
        low, high = logits.masked_fill(want == 0, float("inf")).amin(-1), logits.masked_fill(want > 0, -1e9).amax(-1)
        assert torch.allclose(floors[0], (low + high) / 2, atol=1e-5)  # halfway between the kept and the cut
    else:
        assert floors is None


def test_packed_layers_match_eager_and_are_undone(llama, monkeypatch):
    model, tok = llama
    enc = tok(["3 plus 4 is", "12 plus 9 is 2"], return_tensors="pt", padding=True)
    with torch.no_grad():
        eager = model(**enc).logits  # (B, T, V)
    forwards = {id(m): m.forward for m in model.modules()}
    calls = []
    onednn = torch.ops.mkldnn._linear_pointwise
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", lambda *a: calls.append(1) or onednn(*a))
    with cpu_kernels.packed_linears(model, choose=lambda layer, rows: True) as n, torch.no_grad():
        packed = model(**enc).logits
        assert n == sum(type(m) is torch.nn.Linear for m in model.modules()) == len(calls) > 0  # each ran oneDNN's
    assert torch.allclose(packed, eager, atol=1e-4, rtol=1e-4)
    assert all("forward" not in m.__dict__ for m in model.modules())  # every layer's own forward back
    assert {id(m): m.forward for m in model.modules()}.keys() == forwards.keys()


def test_only_the_chosen_layers_are_packed_and_a_biased_one_matches_eager(monkeypatch):
    """`choose` picks the layers to pack (by default `packing_wins`, per shape); a layer with a bias (Qwen2's
    query, key and value products have one) gives eager's output through oneDNN's linear."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.GELU(), torch.nn.Linear(96, 16, bias=False))
    x = torch.randn(8, 5, 64)  # (B, T, in): a forward's three dimensions
    with torch.no_grad():
        eager = model(x)
    calls = []
    onednn = torch.ops.mkldnn._linear_pointwise
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", lambda *a: calls.append(a[0].shape) or onednn(*a))
    with cpu_kernels.packed_linears(model, rows=8, choose=lambda layer, rows: layer.bias is not None) as n, \
            torch.no_grad():
        packed = model(x)
    assert n == 1 and calls == [(8, 5, 64)]  # the biased layer alone went through oneDNN
    assert torch.allclose(packed, eager, atol=1e-5, rtol=1e-5)


def test_an_input_of_more_rows_than_the_layout_serves_goes_to_the_layers_own_weights(monkeypatch):
    """A packed layer laid out for `rows` rows takes inputs of up to ROW_LIMIT x rows rows through oneDNN (a decode
    step's); a longer one (a prompt's forward, which the layout slows down) runs on the layer's own weights, bit for
    bit eager's."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(64, 32, bias=False)
    limit = cpu_kernels.ROW_LIMIT * 4
    short, long = torch.randn(limit, 64), torch.randn(2, limit // 2 + 1, 64)  # (rows, in); (B, T, in): limit + 2 rows
    with torch.no_grad():
        eager = layer(long)
    calls = []
    onednn = torch.ops.mkldnn._linear_pointwise
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", lambda *a: calls.append(a[0].shape) or onednn(*a))
    with cpu_kernels.packed_linears(layer, rows=4, choose=lambda layer, rows: True), torch.no_grad():
        layer(short)
        got = layer(long)
    assert calls == [(limit, 64)]  # the short input alone went through oneDNN
    assert torch.equal(got, eager)


def test_packing_wins_times_a_shape_once_per_process(monkeypatch):
    """`packing_wins` times packed against eager once for a shape, rows and threads, and answers from memory after."""
    monkeypatch.setattr(packing, "_WINS", {})
    layer = torch.nn.Linear(48, 80, bias=False)
    calls = []
    onednn = torch.ops.mkldnn._linear_pointwise
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", lambda *a: calls.append(1) or onednn(*a))
    first = cpu_kernels.packing_wins(layer, 4)
    timed = len(calls)
    assert timed > 0 and isinstance(first, bool)
    assert cpu_kernels.packing_wins(torch.nn.Linear(48, 80, bias=False), 4) is first and len(calls) == timed
    cpu_kernels.packing_wins(layer, 8)  # another row count: timed again
    assert len(calls) > timed and len(packing._WINS) == 2


def test_packed_layers_serve_neither_autograd_nor_another_thread(llama):
    model, tok = llama
    enc = tok(["5 plus 5 is"], return_tensors="pt")
    with torch.no_grad():
        eager = model(**enc).logits
    with cpu_kernels.packed_linears(model, choose=lambda layer, rows: True):
        with torch.enable_grad():
            out = model(**enc).logits
            out.sum().backward()  # the layers' own weights: gradients flow
        assert torch.equal(out.detach(), eager)  # bit for bit: the eager path, not the copy
        got = {}

        def other():
            with torch.no_grad():
                got["logits"] = model(**enc).logits

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert torch.equal(got["logits"], eager)  # another thread (a trainer's forward) never sees the copy
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    model.zero_grad(set_to_none=True)


class _Heads(torch.nn.Module):  # what sdpa_attention_forward reads of an attention module
    is_causal = True

    def __init__(self, groups: int):
        super().__init__()
        self.num_key_value_groups = groups


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 4), st.integers(1, 4), st.integers(1, 40), st.integers(0, 2**31 - 1),
       st.booleans())
def test_decode_attention_is_sdpas_for_one_query(B, Hkv, R, L, seed, masked):
    """softmax(q k^T * scale + mask) v on the key heads, each query head reading key head h // R, against
    transformers' sdpa (its repeat_kv order): within float rounding, for any batch, head grouping, length and
    left padding."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, h, t, 16, generator=g) for h, t in ((Hkv * R, 1), (Hkv, L), (Hkv, L)))
    mask = None
    if masked:  # left padding: row b attends to its last L - pad[b] positions, at least one
        pad = torch.randint(0, L, (B,), generator=g)
        mask = (torch.arange(L)[None, :] >= pad[:, None])[:, None, None, :]  # (B, 1, 1, L)
    want, _ = sdpa_attention_forward(_Heads(R), q, k, v, mask, scaling=0.25)
    cpu_kernels._decode_owners.add(threading.get_ident())
    try:
        with torch.no_grad():
            got, _ = cpu_kernels.decode_attend(_Heads(R), q, k, v, mask, scaling=0.25)
    finally:
        cpu_kernels._decode_owners.discard(threading.get_ident())
    assert got.shape == want.shape == (B, 1, Hkv * R, 16)
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5)


def test_decode_attention_serves_one_token_steps_of_its_thread_only(llama, monkeypatch):
    """Within the block: a decode step of a left-padded batch runs decode_attend's own products and gives sdpa's
    logits; the prompt's pass, a pass with autograd and another thread's pass go on to sdpa (counted) and give its
    logits bit for bit; on exit the model is on sdpa again."""
    import transformers.integrations.sdpa_attention as sdpa_module
    from transformers import DynamicCache

    from reasoning_rl.models.cache import cache_argument

    model, tok = llama
    assert model.config._attn_implementation == "sdpa"
    tok.padding_side = "left"
    enc = tok(["3 plus 4 is", "12 plus 9 is 2"], return_tensors="pt", padding=True)
    step = torch.tensor([[5], [7]])
    mask = torch.cat([enc["attention_mask"], torch.ones(2, 1, dtype=torch.long)], dim=1)
    kw = cache_argument(model)

    def two_passes():
        cache = DynamicCache(config=model.config)
        first = model(**enc, use_cache=True, **{kw: cache}).logits
        return first, model(input_ids=step, attention_mask=mask, use_cache=True, **{kw: cache}).logits

    with torch.no_grad():
        eager = two_passes()
    to_sdpa = []  # query lengths of the calls decode_attend handed to sdpa
    real = sdpa_module.sdpa_attention_forward
    monkeypatch.setattr(sdpa_module, "sdpa_attention_forward",
                        lambda m, q, *a, **k: to_sdpa.append(q.shape[2]) or real(m, q, *a, **k))
    layers, prompt = model.config.num_hidden_layers, enc["input_ids"].shape[1]
    with cpu_kernels.decode_attention(model) as n:
        assert n == 1 and model.config._attn_implementation == cpu_kernels.DECODE_ATTENTION
        with torch.no_grad():
            fast = two_passes()
        assert to_sdpa == [prompt] * layers  # the decode step's layers ran decode_attend's own products
        assert torch.equal(fast[0], eager[0])
        assert torch.allclose(fast[1], eager[1], atol=1e-5, rtol=1e-5)
        with torch.enable_grad():
            grad_pass = two_passes()
        got = {}

        def other():
            with torch.no_grad():
                got["logits"] = two_passes()

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert to_sdpa == [prompt] * layers + [prompt] * layers + [1] * layers + [prompt] * layers + [1] * layers
    assert model.config._attn_implementation == "sdpa"
    for passes in (grad_pass, got["logits"]):
        assert torch.equal(passes[1].detach(), eager[1])  # sdpa itself served them


def test_decode_attention_leaves_a_model_on_another_attention_alone(llama):
    model, _ = llama
    model.config._attn_implementation = "eager"
    try:
        with cpu_kernels.decode_attention(model) as n:
            assert n == 0 and model.config._attn_implementation == "eager"
        assert model.config._attn_implementation == "eager"
    finally:
        model.config._attn_implementation = "sdpa"


def test_engine_on_packed_kernels_keeps_the_rollout_contract(llama):
    model, tok = llama
    prompts = [PromptRow("a", "3 plus 4 is"), PromptRow("b", "11 plus 20 is")]
    s = SamplingConfig(temperature=1.0, max_tokens=8, seed=5, cpu_decode="packed")
    eng = HFEngine(model, tok)
    a = eng.generate(prompts, 4, s)
    b = eng.generate(prompts, 4, s)
    assert [x.token_ids for g in a for x in g.samples] == [x.token_ids for g in b for x in g.samples]
    assert logprob_mismatch(model, tok, a)["rollout/logprob_mismatch_max"] < 1e-4  # eager recomputation
    eager = eng.generate(prompts, 4, SamplingConfig(temperature=1.0, max_tokens=8, seed=5, cpu_decode="eager"))
    assert [x.token_ids for g in eager for x in g.samples] != [x.token_ids for g in a for x in g.samples]


@pytest.mark.usefixtures("unforced")  # auto's own choice: never forced (tests/machine_as)
def test_auto_leaves_small_models_and_the_tiny_one_on_eager(llama):
    model, _ = llama
    K = cpu_kernels.Kernels
    tiny, _ = build_tiny(config.load(Config, overrides=["model.tiny.num_layers=1"]))
    none = K(pack=False, draw=False, attend=False)
    assert cpu_kernels.resolve("auto", tiny) == cpu_kernels.resolve("auto", model) == none
    assert cpu_kernels.resolve("packed", model) == K(True, True, True, True, True)  # the fused step: a llama
    assert cpu_kernels.resolve("eager", model) == none
    # above the floor, auto is what was measured (tests/test_kernel_choice.py)


def test_a_bad_setting_is_one_line_naming_the_field(llama):
    with pytest.raises(ValueError, match=r"generation.cpu_decode: expected auto, eager or packed, got 'fast'"):
        cpu_kernels.resolve("fast", llama[0])
    with pytest.raises(Exception, match="cpu_decode"):
        config.load(Config, overrides=["generation.cpu_decode=fast"])
