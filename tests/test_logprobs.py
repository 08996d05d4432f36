"""Response-only log-probs (docs/algorithms.md §logprobs): prompt and padding masked, padding layout irrelevant."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from reasoning_rl import config
from reasoning_rl.config.sections import Config
from reasoning_rl.models.logprobs import length_buckets, pad_completions, pad_prompts, sequence_logprob, token_logprobs
from reasoning_rl.algos.losses import entropy_from_logits
from reasoning_rl.models.load import build_tiny


@pytest.fixture(scope="module")
def tiny():
    model, tok = build_tiny(config.load(Config, overrides=["model.tiny.num_layers=2"]))
    return model.eval(), tok


def _manual(model, prompt, completion):
    """One unpadded sequence at a time: log_softmax of the logits that predict each completion token."""
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0], -1)
    return [logp[len(prompt) - 1 + t, tok].item() for t, tok in enumerate(completion)]


def test_matches_unpadded_per_sequence_computation(tiny):
    model, tok = tiny
    prompts = [tok("1+2=")["input_ids"], tok("123+456=")["input_ids"], tok("9=")["input_ids"]]
    comps = [[20, 21, tok.eos_token_id], [22], [23, 24, 25, 26, tok.eos_token_id]]
    p_ids, p_mask = pad_prompts(prompts, tok.pad_token_id)
    c_ids, c_mask = pad_completions(comps, tok.pad_token_id)
    with torch.no_grad():
        lp, ent = token_logprobs(model, p_ids, p_mask, c_ids, c_mask, return_entropy=True)
    for i, (p, c) in enumerate(zip(prompts, comps)):
        assert lp[i, :len(c)].tolist() == pytest.approx(_manual(model, p, c), abs=1e-5)
        assert (lp[i, len(c):] == 0).all() and (ent[i, len(c):] == 0).all()
    seq = sequence_logprob(lp, c_mask)
    assert seq[1].item() == pytest.approx(_manual(model, prompts[1], comps[1])[0], abs=1e-5)
    # the entropy is that of the next-token distribution at the same positions
    ids = torch.tensor([prompts[0] + comps[0]])
    with torch.no_grad():
        full = entropy_from_logits(model(ids).logits)[0, len(prompts[0]) - 1:len(prompts[0]) - 1 + len(comps[0])]
    assert torch.allclose(ent[0, :len(comps[0])], full, atol=1e-4)


def test_padding_token_ids_do_not_matter(tiny):
    model, tok = tiny
    p_ids, p_mask = pad_prompts([tok("1+2=")["input_ids"], tok("10+20=")["input_ids"]], tok.pad_token_id)
    c_ids, c_mask = pad_completions([[20, 21], [22, 23, 24, 25]], tok.pad_token_id)
    with torch.no_grad():
        a = token_logprobs(model, p_ids, p_mask, c_ids, c_mask)
        p2, c2 = p_ids.clone(), c_ids.clone()
        p2[p_mask == 0] = 50
        c2[c_mask == 0] = 60
        b = token_logprobs(model, p2, p_mask, c2, c_mask)
    assert torch.allclose(a, b, atol=1e-5)


def test_temperature_scales_logits(tiny):
    model, tok = tiny
    p_ids, p_mask = pad_prompts([tok("1+2=")["input_ids"]], tok.pad_token_id)
    c_ids, c_mask = pad_completions([[20, 21]], tok.pad_token_id)
    with torch.no_grad():
        hot = token_logprobs(model, p_ids, p_mask, c_ids, c_mask, temperature=2.0)
        logits = model(torch.cat([p_ids, c_ids], 1)).logits[0, p_ids.shape[1] - 1:-1] / 2.0
    ref = torch.log_softmax(logits, -1).gather(-1, c_ids[0].unsqueeze(-1)).squeeze(-1)
    assert torch.allclose(hot[0], ref, atol=1e-5)


def test_batch_mismatch_is_an_error(tiny):
    model, _ = tiny
    with pytest.raises(ValueError, match="batch"):
        token_logprobs(model, torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 3), torch.zeros(3, 2, dtype=torch.long),
                       torch.ones(3, 2))


def test_length_buckets_partition_by_length():
    lengths = [9, 3, 30, 4, 12, 28, 5]
    chunks = length_buckets(lengths, 3)
    assert sorted(i for c in chunks for i in c) == list(range(7)) and len(chunks) == 3
    assert [[lengths[i] for i in c] for c in chunks] == [[3, 4, 5], [9, 12, 28], [30]]
    assert length_buckets([5, 1], 8) == [[1], [0]] and length_buckets([], 4) == []
    # with groups (a prompt's samples), a group stays whole: ordered by its longest row, runs of about equal count
    groups = [0, 1, 2, 1, 0, 2, 3]
    chunks = length_buckets(lengths, 3, groups)
    assert sorted(i for c in chunks for i in c) == list(range(7))
    # runs of at least ceil(7 / 3) rows: groups 1 (longest 4) and 3 (5), then groups 0 (12) and 2 (30)
    assert [sorted(c) for c in chunks] == [[1, 3, 6], [0, 2, 4, 5]]


# (prompt lengths, completion lengths, budget, groups, runs): rows in order of prompt + completion, each run at most
# `budget` padded tokens, rows x (its longest prompt + its longest completion)
@pytest.mark.parametrize("p,c,budget,groups,expected", [
    ([2, 2, 2, 2], [2, 2, 2, 2], 16, None, [[0, 1, 2, 3]]),           # 4 x 4 = 16: one run
    ([2, 2, 2, 2], [2, 2, 2, 2], 15, None, [[0, 1, 2], [3]]),          # 4 x 4 = 16 > 15: cut after three
    ([2, 2, 2], [8, 1, 3], 12, None, [[1, 2], [0]]),                   # 2 x (2 + 3) = 10; 3 x (2 + 8) > 12
    ([9, 1, 1], [1, 9, 1], 12, None, [[2], [0], [1]]),                 # padded 2 x (9 + 9) = 36: apart
    ([2, 2, 2], [30, 1, 1], 8, None, [[1, 2], [0]]),                   # a row longer than the budget runs alone
    ([2, 2, 2, 2], [1, 5, 1, 1], 24, [0, 1, 0, 1], [[0, 2], [1, 3]]),  # groups whole: 4 x 7 = 28 > 24
    ([2, 2, 2, 2], [1, 5, 1, 1], 28, [0, 1, 0, 1], [[0, 2, 1, 3]]),    # both groups fit 28
    ([], [], 10, None, []),
])
def test_token_budget_runs_table(p, c, budget, groups, expected):
    from reasoning_rl.models.logprobs import token_budget_runs

    assert token_budget_runs(p, c, budget, groups) == expected


@given(rows=st.lists(st.tuples(st.integers(1, 40), st.integers(1, 60), st.integers(0, 5)), max_size=40),
       budget=st.integers(1, 400), grouped=st.booleans())
@settings(max_examples=200, deadline=None)
def test_token_budget_runs_partition_within_the_budget(rows, budget, grouped):
    """The runs hold every position once, keep groups whole, hold at most `budget` padded tokens unless one unit is
    alone, and each run but the last could not take the next run's first unit (none closed early)."""
    from reasoning_rl.models.logprobs import token_budget_runs

    p, c, g = [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows] if grouped else None
    runs = token_budget_runs(p, c, budget, g)
    assert sorted(i for r in runs for i in r) == list(range(len(rows)))
    unit = (lambda i: g[i]) if grouped else (lambda i: i)
    size = (lambda r: len(r) * (max(p[i] for i in r) + max(c[i] for i in r)))
    for k, r in enumerate(runs):
        assert size(r) <= budget or len({unit(i) for i in r}) == 1
        if grouped:  # a group in one run only
            assert all(unit(i) not in {unit(j) for j in r} for other in runs[k + 1:] for i in other)
        if k + 1 < len(runs):
            first = [i for i in runs[k + 1] if unit(i) == unit(runs[k + 1][0])]
            assert size(r + first) > budget


# (rows, groups of, length_buckets, live rows, share_prompts, micro-batches): live rows fill micro-batches of at most
# rows / length_buckets rows (a group whole), so a minibatch with rows left out runs as fewer, never larger, passes
@pytest.mark.parametrize("n,g,buckets,live,share,expected", [
    (12, 3, 4, 12, False, 4),   # every row runs: 4 of 3 rows, as length_buckets cuts them
    (12, 3, 4, 6, False, 2),    # half the rows: 2 passes of 3 (was 3 of 2)
    (12, 3, 4, 1, False, 1),    # one row: one pass
    (32, 8, 1, 16, True, 1),    # one bucket: one pass whatever runs
    (128, 8, 4, 16, True, 1),   # two live groups of 8 within a 32-row micro-batch: one pass (was one a group)
    (128, 8, 4, 48, True, 2),   # six groups: two passes of at most 32 rows
])
def test_fewer_live_rows_run_as_fewer_micro_batches_none_larger(n, g, buckets, live, share, expected):
    from reasoning_rl.models.logprobs import TokenBatch
    from reasoning_rl.trainers.grpo_batch import micro_batches

    p_ids = torch.arange(n).div(g, rounding_mode="floor")[:, None].repeat(1, 3) + 5  # (n, 3): a prompt a group
    c_mask = (torch.arange(6)[None, :] < torch.arange(n)[:, None] % 5 + 2).long()  # (n, 6): 2 to 6 tokens
    tokens = TokenBatch(p_ids, torch.ones_like(p_ids), torch.full((n, 6), 7), c_mask, torch.zeros(n, 6))
    mask = torch.zeros(n, dtype=torch.bool)
    mask[torch.randperm(n, generator=torch.Generator().manual_seed(n + live))[:live]] = True
    if share:  # whole groups live
        mask = torch.arange(n) < live
    chunks = list(micro_batches(tokens, buckets, share, None if live == n else mask))
    assert len(chunks) == expected
    assert max(len(m.sub) for m in chunks) <= -(-n // buckets)
    assert sorted(i for m in chunks for i in m.sub.tolist()) == mask.nonzero().squeeze(-1).tolist()

@pytest.mark.parametrize("share", [False, True])
def test_micro_batches_within_a_token_budget_hold_at_most_it(share):
    """grpo.micro_batch_tokens: each micro-batch as it runs (trimmed to its own longest prompt and completion) holds
    at most the budget's padded tokens, live rows only, a group whole with share_prompts; the rows all run once."""
    from reasoning_rl.models.logprobs import TokenBatch
    from reasoning_rl.trainers.grpo_batch import micro_batches

    n, g = 24, 4
    gen = torch.Generator().manual_seed(1)
    tp = torch.randint(2, 8, (n // g,), generator=gen).repeat_interleave(g)  # (n,) a prompt of 2-7 tokens a group
    p_mask = (torch.arange(7)[None, :] >= 7 - tp[:, None]).long()  # (n, 7) left-padded
    p_ids = torch.arange(n).div(g, rounding_mode="floor")[:, None].repeat(1, 7) * p_mask + 5
    c_mask = (torch.arange(12)[None, :] < torch.randint(1, 13, (n, 1), generator=gen)).long()  # (n, 12): 1-12 tokens
    tokens = TokenBatch(p_ids, p_mask, torch.full((n, 12), 7), c_mask, torch.zeros(n, 12))
    live = torch.arange(n) % 8 < 4 if share else torch.rand(n, generator=gen) < 0.7  # groups 0, 2, 4 live / any rows
    chunks = list(micro_batches(tokens, 4, share, live, budget=60))
    assert len(chunks) > 1
    for m in chunks:
        padded = len(m.sub) * (m.p_ids.shape[1] + m.c_ids.shape[1])
        assert padded <= 60 or (share and len(set(m.sub.div(g, rounding_mode="floor").tolist())) == 1), padded
    ran = sorted(i for m in chunks for i in m.sub.tolist())
    assert ran == live.nonzero().squeeze(-1).tolist()
    if share:
        assert all(len({int(i) // g for i in m.sub} & {int(i) // g for i in o.sub}) == 0
                   for a, m in enumerate(chunks) for o in chunks[a + 1:])


def test_the_planned_passes_are_the_budgeted_micro_batches():
    """Under FSDP2 the loop agrees on each rank's pass count before any pass (algorithm.passes): with
    grpo.micro_batch_tokens it counts the budget's micro-batches, which here are more than length_buckets' 4."""
    from types import SimpleNamespace

    from reasoning_rl.models.logprobs import TokenBatch
    from reasoning_rl.trainers.grpo import GRPO, EntropyCoef
    from reasoning_rl.trainers.grpo_batch import GRPOBatch, micro_batches

    n = 12
    p_ids = torch.arange(n).div(3, rounding_mode="floor")[:, None].repeat(1, 3) + 5  # (n, 3)
    c_mask = (torch.arange(6)[None, :] < torch.arange(n)[:, None] % 5 + 2).long()  # (n, 6): 2 to 6 tokens
    tokens = TokenBatch(p_ids, torch.ones_like(p_ids), torch.full((n, 6), 7), c_mask, torch.zeros(n, 6))
    algo = GRPO()
    algo.ent = EntropyCoef(0.0)
    for budget, expected in ((20, len(list(micro_batches(tokens, 4, budget=20)))), (0, 4)):
        cfg = config.load(Config, overrides=[f"grpo.micro_batch_tokens={budget}"])
        learner = SimpleNamespace(rl=cfg.grpo, share_prompts=False)
        assert algo.passes(learner, GRPOBatch(tokens, torch.ones(n), []), torch.arange(n)) == expected
    assert expected < len(list(micro_batches(tokens, 4, budget=20)))


@pytest.mark.parametrize("loss_type", ["dapo", "grpo", "dr_grpo"])
def test_length_bucketed_update_equals_one_padded_batch(tiny, loss_type):
    """The micro-batched GRPO update (each micro-batch padded only to its own longest, losses weighed by their
    share) gives the same gradient and metrics as one padded batch, for each token aggregation, also with each
    group's prompt run once (share_prompts); `grpo.bf16` autocasts it to a gradient within 10% of float32's."""
    from reasoning_rl.models.logprobs import TokenBatch
    from reasoning_rl.trainers.distributed import Ranks
    from reasoning_rl.trainers.grpo_batch import GRPOBatch, micro_batches
    from reasoning_rl.trainers.grpo_batch import update_minibatch as _update

    model, tok = tiny
    gen = torch.Generator().manual_seed(0)
    n = 12
    prompts = [tok(f"{i % 4 * 37}+{i % 4}=")["input_ids"] for i in range(n)]  # 4 groups of 3
    comps = [torch.randint(4, 60, (int(k),), generator=gen).tolist() for k in torch.randint(1, 20, (n,), generator=gen)]
    p_ids, p_mask = pad_prompts(prompts, tok.pad_token_id)
    c_ids, c_mask = pad_completions(comps, tok.pad_token_id)
    with torch.no_grad():
        old = token_logprobs(model, p_ids, p_mask, c_ids, c_mask) + 0.1 * torch.randn(c_ids.shape, generator=gen)
    A = torch.randn(n, generator=gen)
    batch = GRPOBatch(TokenBatch(p_ids, p_mask, c_ids, c_mask, old * c_mask), A, [])
    idx = torch.arange(n)
    grads, metrics = [], []
    for extra in (["grpo.length_buckets=1"], ["grpo.length_buckets=4"], ["grpo.length_buckets=4", "grpo.bf16=true"],
                  ["grpo.length_buckets=2", "share"], ["grpo.micro_batch_tokens=60"]):
        cfg = config.load(Config, overrides=[x for x in extra if x != "share"] + [f"grpo.loss_type={loss_type}"])
        model.zero_grad()
        metrics.append(_update(model, None, Ranks(), cfg.grpo, cfg.generation, batch, idx,
                               share_prompts="share" in extra))
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert grads[0].abs().max() > 1e-4  # a real gradient
    assert torch.allclose(grads[0], grads[1], atol=1e-6, rtol=1e-4), (grads[0] - grads[1]).abs().max()
    assert torch.allclose(grads[0], grads[3], atol=1e-6, rtol=1e-4), (grads[0] - grads[3]).abs().max()
    assert torch.allclose(grads[0], grads[4], atol=1e-6, rtol=1e-4), (grads[0] - grads[4]).abs().max()
    budgeted = list(micro_batches(batch.tokens, 1, budget=60))
    assert len(budgeted) >= 3  # the budget cut it into several passes, and the metrics say how many and how large
    assert metrics[4]["train/passes"] == len(budgeted) and metrics[0]["train/passes"] == 1
    assert metrics[4]["train/largest_pass"] == max(m.padded for m in budgeted) <= 60
    assert metrics[0]["train/largest_pass"] == n * (p_ids.shape[1] + c_ids.shape[1])  # one pass: the padded batch
    bf16_err = ((grads[2] - grads[0]).norm() / grads[0].norm()).item()  # autocast is on, and close to float32
    assert 0 < bf16_err < 0.1, bf16_err
    for k in ("loss/policy", "clip_ratio/region", "approx_kl", "ratio/max", "entropy"):
        assert metrics[1][k] == pytest.approx(metrics[0][k], abs=1e-5), k
        assert metrics[3][k] == pytest.approx(metrics[0][k], abs=1e-5), k
        assert metrics[4][k] == pytest.approx(metrics[0][k], abs=1e-5), k
    model.zero_grad()


def _rows_batch(tok, n=12, seed=0, model=None):
    """A GRPO batch of `n` rows in groups of 3 (4 prompts), completions of 1-19 random tokens, pi_old near pi."""
    from reasoning_rl.models.logprobs import TokenBatch

    gen = torch.Generator().manual_seed(seed)
    prompts = [tok(f"{i // 3 * 37}+{i // 3}=")["input_ids"] for i in range(n)]
    comps = [torch.randint(4, 60, (int(k),), generator=gen).tolist() for k in torch.randint(1, 20, (n,), generator=gen)]
    p_ids, p_mask = pad_prompts(prompts, tok.pad_token_id)
    c_ids, c_mask = pad_completions(comps, tok.pad_token_id)
    with torch.no_grad():
        old = token_logprobs(model, p_ids, p_mask, c_ids, c_mask) + 0.1 * torch.randn(c_ids.shape, generator=gen)
    return TokenBatch(p_ids, p_mask, c_ids, c_mask, old * c_mask), gen


# (advantage layout, loss type, share_prompts): rows 3-8 (groups 1 and 2) have zero advantage on every token
@pytest.mark.parametrize("per_token,loss_type,share", [
    (False, "dapo", False),     # token mean over the minibatch: the left-out rows still count in its denominator
    (False, "grpo", True),      # a mean per sequence; groups kept whole, each prompt run once
    (False, "dr_grpo", False),  # a sum per sequence over max_tokens
    (True, "cispo", False),     # per-token advantages (process supervision), CISPO's weighted log-probs
])
def test_rows_with_zero_advantage_left_out_of_the_update_change_nothing(tiny, per_token, loss_type, share):
    """grpo.skip_zero_advantage: the rows whose advantage is zero everywhere are not run, and the gradient and the
    loss equal those of the update that runs every row; the entropy is the rows' that ran (their own update's), and
    train/zero_advantage_rows is their share. With beta > 0 every row runs (the KL reaches them all)."""
    from reasoning_rl.trainers.distributed import Ranks
    from reasoning_rl.trainers.grpo_batch import GRPOBatch
    from reasoning_rl.trainers.grpo_batch import update_minibatch as _update

    model, tok = tiny
    tokens, gen = _rows_batch(tok, model=model)
    n, Tc = tokens.c_ids.shape
    A = torch.randn(n, Tc, generator=gen) * tokens.c_mask if per_token else torch.randn(n, generator=gen)
    A[3:9] = 0.0
    batch = GRPOBatch(tokens, A, [])
    idx = torch.arange(n)
    grads, metrics = [], []
    for skip in (True, False):
        cfg = config.load(Config, overrides=[f"grpo.loss_type={loss_type}", f"grpo.skip_zero_advantage={skip}"])
        model.zero_grad(set_to_none=True)
        metrics.append(_update(model, None, Ranks(), cfg.grpo, cfg.generation, batch, idx, share_prompts=share))
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert grads[1].abs().max() > 1e-4  # a real gradient
    assert torch.allclose(grads[0], grads[1], atol=1e-7, rtol=1e-5), (grads[0] - grads[1]).abs().max()
    assert metrics[0]["loss/policy"] == pytest.approx(metrics[1]["loss/policy"], abs=1e-6)
    assert metrics[0]["train/zero_advantage_rows"] == pytest.approx(0.5)
    assert metrics[1]["train/zero_advantage_rows"] == 0
    live = torch.tensor([i for i in range(n) if not 3 <= i < 9])
    cfg = config.load(Config, overrides=[f"grpo.loss_type={loss_type}", "grpo.skip_zero_advantage=false"])
    model.zero_grad(set_to_none=True)
    alone = _update(model, None, Ranks(), cfg.grpo, cfg.generation, batch, live, share_prompts=share)
    assert metrics[0]["entropy"] == pytest.approx(alone["entropy"], abs=1e-5)
    assert metrics[0]["entropy"] != pytest.approx(metrics[1]["entropy"], abs=1e-5)  # not every row's
    beta = config.load(Config, overrides=["grpo.beta=0.1"]).grpo
    model.zero_grad(set_to_none=True)
    assert _update(model, model, Ranks(), beta, cfg.generation, batch, idx)["train/zero_advantage_rows"] == 0.0
    model.zero_grad(set_to_none=True)


def test_a_minibatch_of_zero_advantage_rows_still_gives_the_optimiser_zero_gradients(tiny):
    """Every row of the minibatch has zero advantage: no row runs, and GRPO's minibatch makes one zero pass instead,
    so every parameter has a zero gradient (AdamW then steps on its moments, as on the rows' own zero gradient;
    none would skip the parameter) and, under DDP, the all-reduce still meets. `passes` counts that one pass."""
    import verifiers
    from reasoning_rl.trainers.algorithm import Learner, Net
    from reasoning_rl.trainers.distributed import Ranks
    from reasoning_rl.trainers.grpo import GRPO
    from reasoning_rl.trainers.grpo_batch import GRPOBatch

    model, tok = tiny
    tokens, _ = _rows_batch(tok, model=model)
    cfg = config.load(Config)
    learner = Learner(cfg.grpo, cfg.generation, Net("policy", model, model, None, None, "grad_norm"), None, tok,
                      Ranks(), verifiers.Reward.single("math"))  # the reward: the update never reads it
    algo = GRPO()
    algo.setup(learner)
    batch, idx = GRPOBatch(tokens, torch.zeros(len(tokens)), []), torch.arange(len(tokens))
    assert algo.passes(learner, batch, idx) == 1
    model.zero_grad(set_to_none=True)
    m = algo.minibatch(learner, batch, idx)
    assert m["train/zero_advantage_rows"] == 1.0 and m["loss/policy"] == 0.0 and "entropy" not in m
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and not g.any() for g in grads)
    model.zero_grad(set_to_none=True)


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_a_prompt_run_once_for_its_rows_gives_the_same_logprobs_entropy_and_gradients(tiny, lora):
    """share_prompts: each distinct prompt through the model once, its cache gathered to its rows (a group's samples,
    here not adjacent, prompts of different lengths): log-probs, entropies and the gradient of a loss on them equal
    the plain pass's (float noise), on the full model and through LoRA adapters."""
    import copy

    from reasoning_rl.models.logprobs import prompt_runs

    model, tok = tiny
    model = copy.deepcopy(model).train()
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                                 init_lora_weights=False))
    prompts = [tok(p)["input_ids"] for p in ["12+7=", "3*45=", "12+7=", "9=", "3*45=", "12+7="]]
    comps = [[20, 21, tok.eos_token_id], [22], [23, 24, 25, 26, tok.eos_token_id], [27, 28], [29, 30, 31], [32]]
    p_ids, p_mask = pad_prompts(prompts, tok.pad_token_id)
    c_ids, c_mask = pad_completions(comps, tok.pad_token_id)
    first, inverse = prompt_runs(p_ids, p_mask)
    assert len(first) == 3 and [prompts[int(first[i])] for i in inverse] == prompts

    def run(share):
        model.zero_grad()
        lp, ent = token_logprobs(model, p_ids, p_mask, c_ids, c_mask, temperature=0.7, return_entropy=True,
                                 share_prompts=share)
        ((lp * torch.arange(1.0, 1.0 + lp.shape[1])).sum() + ent.sum()).backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        return lp.detach(), ent.detach(), grads

    lp0, ent0, g0 = run(False)
    lp1, ent1, g1 = run(True)
    assert torch.allclose(lp1, lp0, atol=1e-5) and torch.allclose(ent1, ent0, atol=1e-5)
    assert (lp1[c_mask == 0] == 0).all()
    assert g0.keys() == g1.keys() and len(g0) > 0
    for name in g0:
        assert torch.allclose(g1[name], g0[name], atol=1e-4, rtol=1e-4), name


def test_distinct_prompts_take_the_plain_pass(tiny, monkeypatch):
    """Nothing to share (every prompt distinct): the one plain forward pass, not two."""
    model, tok = tiny
    calls = []
    real = model.forward
    monkeypatch.setattr(model, "forward", lambda *a, **k: calls.append(1) or real(*a, **k))
    p_ids, p_mask = pad_prompts([tok("1+2=")["input_ids"], tok("10+20=")["input_ids"]], tok.pad_token_id)
    c_ids, c_mask = pad_completions([[20, 21], [22, 23, 24, 25]], tok.pad_token_id)
    with torch.no_grad():
        token_logprobs(model, p_ids, p_mask, c_ids, c_mask, share_prompts=True)
    assert len(calls) == 1
