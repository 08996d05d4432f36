"""Top-p sampling trains on the distribution it drew from (docs/algorithms.md §kept-set): the hf engine records each
token's log-prob over the kept set and the set's floor; the trainer, given the floors, computes the same log-probs
from its own logits, so an on-policy ratio is 1 where the whole-softmax one is the kept mass; engines and paths that
cannot carry the set are refused in one line."""
import dataclasses
import math
import subprocess

import pytest

from reasoning_rl import config
from reasoning_rl.config.sections import Config
from reasoning_rl.rollout import HFEngine, PromptRow, SamplingConfig
from reasoning_rl.rollout import logprob_mismatch
from tests.conftest import PY, ROOT, run_env
from tests.test_rollout_hf import PROMPTS, tiny  # noqa: F401 (a fixture)


@pytest.mark.parametrize("stop", [(), ("9",)])  # the decode loop; generate (which stop strings take)
def test_the_trainer_rebuilds_the_engines_kept_set_log_probs(tiny, stop):
    import torch

    model, tok = tiny
    torch.manual_seed(0)
    groups = HFEngine(model, tok).generate(PROMPTS, n=6, sampling=SamplingConfig(temperature=1.3, top_p=0.8,
                                                                                  max_tokens=8, stop=stop))
    samples = [s for g in groups for s in g.samples]
    assert all(len(s.floors) == len(s.token_ids) for s in samples)
    kept = logprob_mismatch(model, tok, groups, temperature=1.3)
    whole = logprob_mismatch(model, tok, [dataclasses.replace(g, samples=[dataclasses.replace(s, floors=())
                                                                           for s in g.samples]) for g in groups],
                             temperature=1.3)
    assert kept["rollout/logprob_mismatch_max"] < 1e-4  # the same distribution, up to float noise
    # without the floors the trainer's log-prob is the whole softmax's: lower by the log of the kept mass, 1 - 0.8
    # of the mass at most being cut where the set holds more than one token
    assert whole["rollout/logprob_mismatch_mean"] > 1e-3 and whole["rollout/logprob_mismatch_max"] > math.log(1 / 0.9)
    plain = HFEngine(model, tok).generate(PROMPTS, n=2, sampling=SamplingConfig(temperature=1.3, max_tokens=8))
    assert all(s.floors == () for g in plain for s in g.samples)  # nothing cut: nothing recorded


def test_an_on_policy_grpo_update_under_top_p_has_ratio_one(tmp_path):
    """One GRPO round at top_p 0.8, one minibatch: the trainer's log-probs equal the engine's (ratio 1 up to float
    noise); the whole softmax's would be the kept mass, below 1 on every token whose set was cut."""
    from reasoning_rl.trainers.grpo import train_grpo

    cfg = config.load(Config, overrides=[
        f"output_dir={tmp_path}", "model.tiny.num_layers=1", "grpo.steps=1", "grpo.prompts_per_step=4",
        "grpo.group_size=4", "grpo.minibatch_size=16", "grpo.filter_mixed=false", "grpo.eval_every=0",
        "grpo.eval_at_start=false", "grpo.eval_at_end=false", "grpo.train_prompts=16", "grpo.verifier_workers=1",
        "grpo.skip_zero_advantage=false", "generation.top_p=0.8", "generation.temperature=1.5"])
    history, _, _ = train_grpo(cfg, log=lambda *_: None)
    m = history[-1]
    assert abs(m["ratio/mean"] - 1) < 1e-4 and abs(m["ratio/max"] - 1) < 1e-4, m


# (the command's settings, the words its one line must hold)
REFUSED = [
    (["train", "grpo", "--set", "grpo.engine=openai", "--set", "grpo.engine_url=http://127.0.0.1:9",
      "--set", "grpo.engine_model=m"], "openai"),
    (["train", "grpo", "--set", "grpo.environment=calculator"], "multi-turn episodes"),
    (["train", "distill", "--set", "distill.teacher=tiny"], "distillation"),
]


@pytest.mark.parametrize("args,words", REFUSED)
def test_a_path_that_cannot_carry_the_kept_set_is_refused_in_one_line(tmp_path, args, words):
    r = subprocess.run([PY, "-m", "reasoning_rl", *args, "--set", "generation.top_p=0.9",
                        "--set", f"output_dir={tmp_path / 'run'}"], capture_output=True, text=True, env=run_env(),
                       cwd=ROOT, timeout=300)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "generation.top_p=0.9" in lines[0] and words in lines[0], \
        r.stderr
    assert not (tmp_path / "run").exists()  # refused before anything ran


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_real_models_mean_ratio_under_top_p_is_the_kept_mass_without_floors_and_one_with_them():
    """SmolLM2-135M-Instruct samples 24 word problems x 4 at top_p 0.8 (temperature 1, 48 tokens): the mean of the
    token ratios pi_trainer / pi_engine, the trainer recomputing on the same weights, is the mean kept mass with
    the whole softmax (below 0.97: the bias) and within 1% of 1 over the kept sets; the figures in results.md."""
    import torch

    from reasoning_rl.models.load import load_policy
    from reasoning_rl.models.logprobs import pad_rollouts, token_logprobs

    cfg = config.load(Config, None, ["model.name_or_path=smollm2-135m-instruct", "num_threads=2"])
    model, tok = load_policy(cfg, log=lambda *_: None)
    model.eval()
    questions = [f"Sam has {a} apples and buys {b} more, then gives away {c}. How many apples does he have now?"
                 for a, b, c in zip(range(13, 37), range(5, 29), range(2, 26))]
    prompts = [PromptRow(str(i), tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False,
                                                          add_generation_prompt=True)) for i, q in enumerate(questions)]
    torch.manual_seed(0)
    groups = HFEngine(model, tok).generate(prompts, n=4, sampling=SamplingConfig(temperature=1.0, top_p=0.8,
                                                                                  max_tokens=48))
    stats = {}
    for name, strip in (("whole", True), ("kept", False)):
        ratios = []
        for g in groups:
            batch = [dataclasses.replace(s, floors=()) if strip else s for s in g.samples]
            b = pad_rollouts([tok(g.prompt)["input_ids"]] * len(batch),
                             [list(s.token_ids) for s in batch], [list(s.logprobs) for s in batch],
                             tok.pad_token_id, floors=[s.floors for s in batch])
            with torch.no_grad():
                lp = token_logprobs(model, b.p_ids, b.p_mask, b.c_ids, b.c_mask, floor=b.floor)
            ratios.append(torch.exp(lp - b.logp_old)[b.c_mask.bool()])
        stats[name] = float(torch.cat(ratios).mean())
    print(f"mean token ratio at top_p 0.8: whole softmax {stats['whole']:.4f}, kept set {stats['kept']:.4f}")
    assert stats["whole"] < 0.97 and abs(stats["kept"] - 1) < 0.01, stats
