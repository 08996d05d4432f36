"""The GRPO loop on the real tiny model: mechanics (fast) and learning (slow)."""
import json

import pytest

from reasoning_rl import config
from reasoning_rl.config.sections import Config
from reasoning_rl.trainers.metric_docs import undocumented
from reasoning_rl.trainers.grpo import train_grpo


@pytest.mark.timeout(300)
@pytest.mark.parametrize("chunks", [1, 3])  # 3: each round generated in chunks, verified in the background
def test_grpo_loop_mechanics(tmp_path, chunks):
    cfg = config.load(Config, overrides=[
        f"output_dir={tmp_path}", "model.sft_warm_start=false", "model.tiny.num_layers=1",
        "grpo.steps=2", "grpo.prompts_per_step=4", "grpo.group_size=4", "eval.size=20", "grpo.eval_every=1",
        "grpo.filter_mixed=false", "grpo.beta=0.04", "grpo.train_prompts=32", "grpo.verifier_workers=1",
        f"grpo.rollout_chunks={chunks}"])
    history, model, tok = train_grpo(cfg, log=lambda *_: None)
    assert [h["step"] for h in history] == [1, 2]
    for key in ("reward/mean", "groups/pct_mixed", "frac_reward_zero_std", "curriculum/yield", "time/rollout",
                "time/verify", "time/verify_busy", "time/update", "throughput/tokens_per_s", "completions/mean_length", "eval/accuracy"):
        assert key in history[-1], key
    trained = [h for h in history if "train/samples" in h]
    assert all(h["train/samples"] == 16 for h in trained)  # 4 groups x 4 samples, none masked
    assert all("kl" in h and "clip_ratio/region" in h and h["entropy"] > 0 for h in trained)
    assert "rollout/logprob_mismatch_max" in history[0] and history[0]["rollout/logprob_mismatch_max"] < 1e-3
    assert all(h["time/verify_busy"] > 0 for h in history)
    archive = [json.loads(x) for x in (tmp_path / "archive.jsonl").read_text().splitlines()]
    assert len(archive) == 2 * 4 * 4 and len({(r["step"], r["prompt_id"]) for r in archive}) == 2 * 4
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert lines[0]["step"] == 0 and lines[-1]["step"] == 2
    assert undocumented(k for line in lines for k in line) == []  # docs/metrics.md lists every key written
    assert (tmp_path / "final" / "config.json").exists() and (tmp_path / "ledger.sqlite").exists()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_grpo_reward_rises_on_a_small_prompt_set(tmp_path):
    """RL on 16 train prompts from the SFT start: the verified reward climbs (0.28 -> ~0.6 measured)."""
    cfg = config.load(Config, overrides=[
        f"output_dir={tmp_path}", "grpo.steps=30", "grpo.eval_every=30", "eval.size=50",
        "grpo.train_prompts=16", "grpo.prompts_per_step=16", "grpo.sampler=uniform", "grpo.filter_mixed=false",
        "grpo.lr=3e-4"])
    history, _, _ = train_grpo(cfg, log=lambda *_: None)
    first = sum(h["reward/mean"] for h in history[:5]) / 5
    last = sum(h["reward/mean"] for h in history[-5:]) / 5
    assert last > first + 0.1, (first, last)


def test_shuffled_rewards_control_keeps_the_rewards_but_not_their_samples():
    import random

    from reasoning_rl.trainers.rounds import shuffle_verdicts
    from reasoning_rl.types import Group, Sample, Verdict

    groups = [Group(f"p{b}", f"{b}+1=", {}, [Sample(f"{b}-{i}", (1,), (0.0,), "stop",
                                                     {"math": Verdict.correct() if i < b else Verdict.incorrect()})
                                              for i in range(4)]) for b in range(4)]
    out = shuffle_verdicts(groups, random.Random(0))
    passed = lambda gs: [s.verdicts["math"].passed for g in gs for s in g.samples]  # noqa: E731
    assert sorted(passed(out)) == sorted(passed(groups)) and passed(out) != passed(groups)
    assert [s.text for g in out for s in g.samples] == [s.text for g in groups for s in g.samples]


def test_a_round_that_trains_nothing_says_why_and_an_idle_run_warns():
    """No silent no-op: the log line of a round without a trainable group names the cause, and a run whose rounds
    mostly trained nothing ends with a warning that names the likeliest cause and what to try."""
    from reasoning_rl.trainers.log_lines import log_line as _log_line, warn_if_idle as _warn_if_idle

    failed = {"step": 2, "reward/mean": 0.0, "groups/pct_all_fail": 1.0, "groups/pct_mixed": 0.0, "train/samples": 0}
    assert _log_line(failed, 3).endswith("NO UPDATE: no trainable group (every sample failed: 1.00 of groups)")
    trained = dict(failed, **{"groups/pct_all_fail": 0.5, "groups/pct_mixed": 0.5, "train/samples": 8})
    assert "NO UPDATE" not in _log_line(trained, 3)
    said: list[str] = []
    _warn_if_idle([failed, failed, trained], said.append)
    assert said == ["WARNING: 2 of 3 rounds trained nothing; mostly because every sample failed (mean 1.00 in those "
                    "rounds). Try easier data, a larger group, longer completions or a warm start."]
    said.clear()
    _warn_if_idle([failed, trained, trained], said.append)
    assert said == []


@pytest.mark.timeout(300)
@pytest.mark.parametrize("knobs,evaluated", [
    (["grpo.eval_every=0"], [0, 3]),  # periodic evaluation off; the start and the end stay
    (["grpo.eval_every=0", "grpo.eval_at_start=false", "grpo.eval_at_end=false"], []),  # none at all
    (["grpo.eval_every=2", "grpo.eval_at_end=false"], [0, 2]),
])
def test_evaluation_cadence_can_be_turned_off(tmp_path, knobs, evaluated):
    cfg = config.load(Config, overrides=[
        f"output_dir={tmp_path}", "model.sft_warm_start=false", "model.tiny.num_layers=1", "grpo.steps=3",
        "grpo.prompts_per_step=2", "grpo.group_size=2", "eval.size=4", "grpo.filter_mixed=false",
        "grpo.train_prompts=8", "grpo.verifier_workers=1", "grpo.checkpoint_every=0", *knobs])
    train_grpo(cfg, log=lambda *_: None)
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines if "eval/accuracy" in m] == evaluated
    assert [m["step"] for m in lines if "reward/mean" in m] == [1, 2, 3]


@pytest.mark.timeout(300)
def test_micro_batches_within_a_token_budget_train_the_weights_of_one_padded_batch(tmp_path, monkeypatch):
    """grpo.micro_batch_tokens on the tiny model: three rounds whose 16-row minibatches run as several passes of at
    most 48 padded tokens end on the weights of the run that takes each minibatch in one pass (float noise), and the
    metrics say how many passes ran and how large the largest was.

    The optimiser is plain SGD here, so a weight moves by lr times its gradient and the two runs differ by lr times
    the gradients' float noise. Under Adam they need not: Adam divides each gradient by its own running size, so a
    weight whose true gradient is zero moves by up to lr a step in the direction of whatever rounding noise its
    gradient has, and that noise depends on the kernels' order of summation, which differs between processors (on
    an AVX-512 machine the Adam version of this test moved such a weight by 7e-4 against a bound of 1e-4). What this
    test checks, that the passes add up to the one padded batch's gradient, is the same under either."""
    import torch

    from reasoning_rl.trainers import loop

    def sgd(module, lr, warmup_steps):
        opt = torch.optim.SGD([p for p in module.parameters() if p.requires_grad], lr=lr)
        return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)

    monkeypatch.setattr(loop, "adamw", sgd)
    runs, start = {}, None
    for cut in ("grpo.length_buckets=1", "grpo.micro_batch_tokens=48"):
        cfg = config.load(Config, overrides=[
            f"output_dir={tmp_path / cut}", "model.tiny.num_layers=1", "grpo.steps=3", "grpo.prompts_per_step=4",
            "grpo.group_size=4", "grpo.minibatch_size=16", "grpo.filter_mixed=false", "grpo.sampler=uniform",
            "grpo.eval_every=0", "grpo.eval_at_start=false", "grpo.eval_at_end=false", "grpo.train_prompts=32",
            "grpo.verifier_workers=1", "grpo.warmup_steps=0", "grpo.lr=1e-3", "grpo.skip_zero_advantage=false", cut])
        if start is None:
            from reasoning_rl.models.load import load_policy

            start = [p.detach().clone() for p in load_policy(cfg, log=lambda *_: None)[0].parameters()]
        history, model, _ = train_grpo(cfg, log=lambda *_: None)
        runs[cut] = history, [p.detach().clone() for p in model.parameters()]
    (h_one, w_one), (h_cut, w_cut) = runs.values()
    assert all(h["train/passes"] == 1 for h in h_one)
    assert all(h["train/passes"] > 2 and h["train/largest_pass"] <= 48 for h in h_cut), h_cut
    assert [h["reward/mean"] for h in h_one] == [h["reward/mean"] for h in h_cut]
    # float32 sums of L terms in another order differ by at most about L * eps of their magnitude: each weight's
    # difference is bounded by its whole movement (lr x the sum of its gradients) times eps x L, L the reduction's
    # length (the minibatch's tokens, at most 16 rows x 48), plus the rounding of each step's w - lr * g to the
    # weight's own float (eps x |w| a step: two updates that differ in their last bit land on neighbouring floats)
    eps, L = torch.finfo(torch.float32).eps, 16 * 48
    for a, b, w0 in zip(w_one, w_cut, start):
        bound = 3 * eps * (L * (a - w0).abs().max().item() + a.abs().max().item())
        assert (a - b).abs().max().item() <= bound, ((a - b).abs().max().item(), bound)


@pytest.mark.timeout(300)
def test_leaving_out_zero_advantage_rows_trains_the_same_weights(tmp_path):
    """grpo.skip_zero_advantage on the tiny model, every group kept (filter_mixed=false), minibatches of 4 rows so
    some hold only rows of uniform groups: three rounds end on the same weights (float noise) and draw the same
    samples as the run that runs every row."""
    runs = {}
    for skip in (True, False):
        cfg = config.load(Config, overrides=[
            f"output_dir={tmp_path / str(skip)}", "model.tiny.num_layers=1", "grpo.steps=3", "grpo.prompts_per_step=4",
            "grpo.group_size=4", "grpo.minibatch_size=4", "grpo.filter_mixed=false", "grpo.sampler=uniform",
            "grpo.eval_every=0", "grpo.eval_at_start=false", "grpo.eval_at_end=false", "grpo.train_prompts=32",
            "grpo.verifier_workers=1", "grpo.warmup_steps=0", "grpo.lr=1e-3", f"grpo.skip_zero_advantage={skip}"])
        history, model, _ = train_grpo(cfg, log=lambda *_: None)
        runs[skip] = history, [p.detach().clone() for p in model.parameters()]
    (h_skip, w_skip), (h_all, w_all) = runs[True], runs[False]
    assert sum(h["train/zero_advantage_rows"] for h in h_skip) > 0  # rows were left out
    assert all(h["train/zero_advantage_rows"] == 0 for h in h_all)
    assert [h["reward/mean"] for h in h_skip] == [h["reward/mean"] for h in h_all]
    assert [h["completions/mean_length"] for h in h_skip] == [h["completions/mean_length"] for h in h_all]
    moved = max((a - b).abs().max().item() for a, b in zip(w_all, w_skip))
    assert moved < 1e-5, moved


@pytest.mark.timeout(300)
def test_a_tokenizer_without_a_bos_token_trains_through_a_minibatch_of_zero_advantage_rows(tmp_path):
    """A Hugging Face model whose tokenizer has no BOS token (a byte-level BPE one, as Qwen2's tokenizers are):
    the untrained model fails every GSM8K row, so every group is uniform and the minibatch runs only the zero pass
    that keeps AdamW (and DDP) in step. That pass once fed the BOS id, None here, and the run died (CI, stop 58)."""
    from transformers import AutoTokenizer

    from .helpers.hf_model import build_hf_model, gsm8k_rows, write_jsonl

    rows = gsm8k_rows(12)
    data = write_jsonl(tmp_path / "gsm8k.jsonl", rows)
    model = build_hf_model(tmp_path / "model", [r["question"] + "\n" + r["answer"] for r in rows], vocab_size=300)
    assert AutoTokenizer.from_pretrained(model).bos_token_id is None
    cfg = config.load(Config, overrides=[
        f"output_dir={tmp_path / 'run'}", f"model.name_or_path={model}", f"tasks.source={data}", "tasks.preset=gsm8k",
        "grpo.steps=1", "grpo.prompts_per_step=2", "grpo.group_size=2", "grpo.filter_mixed=false",
        "grpo.eval_every=0", "grpo.eval_at_start=false", "grpo.eval_at_end=false", "grpo.verifier_workers=1",
        "generation.max_tokens=8", "num_threads=1"])
    history, _, _ = train_grpo(cfg, log=lambda *_: None)
    assert history[0]["reward/mean"] == 0.0 and history[0]["train/zero_advantage_rows"] == 1.0
    assert history[0]["loss/policy"] == 0.0


def test_the_trainers_adamw_is_fused_where_it_can_be_and_steps_as_the_default_loop():
    """trainers.algorithm.adamw: PyTorch's fused AdamW for plain float32 parameters (one kernel over every tensor),
    the default loop for other dtypes; five steps on the same gradients land where the default loop's do (float
    rounding), warm-up included."""
    import torch

    from reasoning_rl.trainers.algorithm import adamw

    torch.manual_seed(0)
    nets = [torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Linear(5, 3)) for _ in range(2)]
    nets[1].load_state_dict(nets[0].state_dict())
    start = nets[0][0].weight.detach().clone()
    opt, sched = adamw(nets[0], lr=1e-2, warmup_steps=3)
    assert opt.param_groups[0]["fused"] is True
    ref = torch.optim.AdamW(nets[1].parameters(), lr=1e-2, betas=(0.9, 0.99), weight_decay=0.0, foreach=False)
    ref_sched = torch.optim.lr_scheduler.LambdaLR(ref, lambda s: min(1.0, (s + 1) / 3))
    for _ in range(5):
        x = torch.randn(4, 6)
        for net, o, s in ((nets[0], opt, sched), (nets[1], ref, ref_sched)):
            o.zero_grad()
            net(x).square().sum().backward()
            o.step()
            s.step()
    for a, b in zip(nets[0].parameters(), nets[1].parameters()):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-5)
    assert (nets[0][0].weight - start).abs().max() > 1e-3  # five steps of lr 1e-2 moved it
    double = torch.nn.Linear(3, 2).double()
    assert not adamw(double, lr=1e-3, warmup_steps=0)[0].param_groups[0]["fused"]
