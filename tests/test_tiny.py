"""The embedded default: tokenizer, model, tasks and the SFT warm start, all built in code."""
import subprocess

import pytest
import torch

from reasoning_rl import config
from reasoning_rl.config.sections import Config
from reasoning_rl.models.load import build_tiny
from reasoning_rl.models.sft import encode_pairs, sft_completion, sft_loss, train_sft
from reasoning_rl.task.embedded.arithmetic import TaskConfig, make_dataset, make_rows, worked_solution
from reasoning_rl.models.tiny.tokenizer import build_char_tokenizer

from .conftest import PY, run_env


def test_tokenizer_round_trips_and_adds_bos(tmp_path):
    tok = build_char_tokenizer()
    text = "12+345=-7 * (x)\nok"
    ids = tok(text)["input_ids"]
    assert ids[0] == tok.bos_token_id and len(ids) == len(text) + 1
    assert tok.decode(ids, skip_special_tokens=True) == text
    tok.save_pretrained(tmp_path)
    from transformers import AutoTokenizer

    tok2 = AutoTokenizer.from_pretrained(tmp_path)
    assert tok2(text)["input_ids"] == ids and tok2.decode(ids[1:]) == text
    assert tok2.pad_token_id == tok.pad_token_id and tok2.padding_side == "left"


def test_model_size_and_save_load_round_trip(tmp_path):
    cfg = Config()
    model, tok = build_tiny(cfg)
    n = sum(p.numel() for p in model.parameters())
    assert 500_000 < n < 5_000_000
    assert model.config.head_dim >= 64
    model.save_pretrained(tmp_path)
    from transformers import AutoModelForCausalLM

    again = AutoModelForCausalLM.from_pretrained(tmp_path)
    ids = tok(["1+2="], return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, again(ids).logits, atol=1e-6)


def test_tasks_are_deterministic_and_splits_never_overlap():
    cfg = TaskConfig(num_train=500, num_test=100, seed=3)
    a_train, a_test = make_rows(cfg)
    b_train, b_test = make_rows(cfg)
    assert a_train == b_train and a_test == b_test
    assert {r["prompt"] for r in a_train}.isdisjoint({r["prompt"] for r in a_test})
    # a different seed gives different prompts but the same split rule: still disjoint
    c_train, c_test = make_rows(TaskConfig(num_train=500, num_test=100, seed=4))
    assert {r["prompt"] for r in c_train}.isdisjoint({r["prompt"] for r in a_test})
    for r in a_train + a_test:
        assert eval(r["prompt"][:-1]) == int(r["answer"])  # the answer is exact
    ds = make_dataset(cfg)
    assert set(ds) == {"train", "test"} and ds["train"].column_names == ["prompt_id", "task", "prompt", "answer"]


# (task, prompt, expected worked solution)
WORKED = [
    ("add", "47+85=", "\n7+5=12;4+8+1=13\n132"),    # carry into a new column
    ("add", "3+45=", "\n3+5=8;0+4=4\n48"),          # operands of different lengths
    ("sub", "52-47=", "\n12-7=5;5-4-1=0\n5"),       # borrow; the leading zero is not written
    ("sub", "2-21=", "\n-(21-2);11-2=9;2-0-1=1\n-19"),  # negative: swap, then subtract
    ("chain", "8+8+9+7=", "\n8+8=16;16+9=25;25+7=32\n32"),  # running sums
    ("mul", "7*86=", "\n7*6=42;7*8=56;42+560\n602"),  # partial products by digit
    ("mul", "3*6=", "\n3*6=18\n18"),
]


@pytest.mark.parametrize("task,prompt,expected", WORKED)
def test_worked_solutions_table(task, prompt, expected):
    assert worked_solution({"task": task, "prompt": prompt, "answer": str(eval(prompt[:-1]))}) == expected


def test_every_worked_step_is_true_and_ends_with_the_answer():
    train, test = make_rows(TaskConfig(max_digits=3, num_train=1500, num_test=200, seed=1))
    for r in train + test:
        w = worked_solution(r)
        assert w.startswith("\n") and w.endswith("\n" + r["answer"]), (r, w)
        for step in w.strip().split("\n")[0].split(";"):
            lhs, _, rhs = step.partition("=")
            if rhs:  # "-(b-a)" and the partial-product sum are restatements, not equations
                assert eval(lhs) == int(rhs), (r, step)
    assert worked_solution({"task": "digit_sum", "prompt": "x", "answer": "1", "tests": []}) is None


def test_sft_targets_mix_worked_and_direct_in_the_configured_share():
    import random

    rng = random.Random(0)
    row = {"task": "add", "prompt": "47+85=", "answer": "132"}
    targets = [sft_completion(row, 0.25, rng) for _ in range(4000)]
    share = sum(t.startswith("\n") for t in targets) / len(targets)
    assert 0.22 < share < 0.28 and set(targets) == {"132", worked_solution(row)}
    assert {sft_completion(row, 0.0, rng) for _ in range(100)} == {"132"}


def test_tasks_too_many_requested_is_a_clear_error():
    with pytest.raises(ValueError, match="distinct prompts"):
        make_rows(TaskConfig(families=("mul",), max_digits=1, num_train=500, num_test=10))


def test_response_mask_covers_answer_and_eos_only():
    tok = build_char_tokenizer()
    ids, attn, resp = encode_pairs(tok, ["1+2=", "10+20="], ["3", "30"])
    assert ids.shape == (2, 1 + 6 + 2 + 1)
    row0 = ids[0][resp[0].bool()].tolist()
    assert tok.decode(row0[:-1]) == "3" and row0[-1] == tok.eos_token_id
    assert attn[0].sum() == 1 + 4 + 2 and resp[1].sum() == 3


def test_short_sft_lowers_the_loss():
    cfg = config.load(Config, overrides=["sft.steps=40", "sft.batch_size=32", "sft.warmup_steps=5", "sft.log_every=1000"])
    model, tok = build_tiny(cfg)
    rows, _ = make_rows(cfg.tasks)
    batch = rows[:64]
    ids, attn, resp = encode_pairs(tok, [r["prompt"] for r in batch], [r["answer"] for r in batch])
    with torch.no_grad():
        before = sft_loss(model, ids, attn, resp).item()
    train_sft(cfg, model, tok, rows, log=lambda *_: None)
    with torch.no_grad():
        after = sft_loss(model, ids, attn, resp).item()
    assert after < before - 1.0, (before, after)


@pytest.mark.parametrize("micro", [1, 3, 7])
def test_an_sft_step_in_micro_batches_takes_the_whole_batchs_step(micro):
    """sft.micro_batch: slices of the batch, each weighted by its response tokens, give the whole batch's loss and
    gradients (to float rounding); rows of different response lengths make an unweighted mean differ."""
    import copy
    import random

    from reasoning_rl.models.sft import auto_micro_batch, sft_step

    cfg = config.load(Config, overrides=["model.tiny.num_layers=1", "sft.batch_size=8"])
    rows, _ = make_rows(cfg.tasks)
    base, tok = build_tiny(cfg)
    grads, losses = [], []
    for m in (0, micro):
        model = copy.deepcopy(base)
        opt = torch.optim.SGD(model.parameters(), lr=0.0)  # the step leaves the weights; the gradients stay
        s = config.load(Config, overrides=["sft.batch_size=8", f"sft.micro_batch={m}", "sft.worked_fraction=0.5"]).sft
        losses.append(sft_step(model, tok, opt, rows, random.Random(0), s))
        grads.append([p.grad.clone() for p in model.parameters()])
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)
    assert auto_micro_batch(60, 40) >= 64 and auto_micro_batch(400, 49_152) == 13  # tiny: whole; real: 13 rows


@pytest.mark.slow  # two fresh interpreters, one of them training; the SFT itself is tested in-process above
def test_cli_sft_writes_a_checkpoint_and_prints_accuracy(tmp_path):
    r = subprocess.run([PY, "-m", "reasoning_rl", "sft", "--set", "sft.steps=20", "--set", "sft.batch_size=8", "--set", "eval.size=10",
                        "--output", str(tmp_path / "ckpt")],
                       capture_output=True, text=True, env=run_env(REASONING_RL_CACHE=str(tmp_path / "cache")),
                       timeout=600)
    assert r.returncode == 0, r.stderr
    assert "held-out accuracy: " in r.stdout
    acc = float(r.stdout.split("held-out accuracy: ")[1].split()[0])
    assert 0.0 <= acc <= 1.0
    from transformers import AutoModelForCausalLM, AutoTokenizer

    AutoModelForCausalLM.from_pretrained(tmp_path / "ckpt")
    assert AutoTokenizer.from_pretrained(tmp_path / "ckpt").decode([40]) != ""
    # the cache is reused: a second run does not train again
    r2 = subprocess.run([PY, "-m", "reasoning_rl", "sft", "--set", "sft.steps=20", "--set", "sft.batch_size=8", "--set", "eval.size=10"],
                        capture_output=True, text=True, env=run_env(REASONING_RL_CACHE=str(tmp_path / "cache")),
                        timeout=600)
    assert r2.returncode == 0 and "sft step" not in r2.stdout


@pytest.mark.slow
def test_default_sft_reaches_moderate_heldout_accuracy():
    from reasoning_rl.models.load import load_policy
    from reasoning_rl.eval import held_out
    from reasoning_rl.task.task import Task

    cfg = Config()
    model, tok = load_policy(cfg)
    task = Task.from_config(cfg.tasks)
    acc = held_out.accuracy(task, model, tok, task.test)  # through the `math` verifier, as the trainers score it
    assert 0.5 <= acc <= 0.8, acc  # measured 0.670: room left for RL, which reaches 0.94 (docs/results.md)
