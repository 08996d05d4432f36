"""Format rules (spoofed tags must fail), reward composition (masking), and the TRL adapter."""
import pytest

from reasoning_rl.types import Status, Verdict
from verifiers import Reward, Term, as_trl_reward
from verifiers.format import Boxed, Repetition, SoftLength, ThinkAnswer

TA = ThinkAnswer()

# (completion, well-formed?) -- think/answer structure
THINK_ANSWER = [
    ("<think>2+2</think><answer>4</answer>", True),  # canonical
    ("<think>\n2+2\n</think>\n<answer>\n4\n</answer>\n", True),  # whitespace between parts
    ("<think>a</think>", False),  # no answer
    ("<answer>4</answer>", False),  # no think
    ("<answer>4</answer><think>a</think>", False),  # wrong order
    ("<think>a</think><answer></answer>", False),  # empty answer
    ("<think>a</think><answer>  </answer>", False),  # blank answer
    ("<think>a<think>b</think></think><answer>4</answer>", False),  # nested think
    ("<think>a</think><answer>4</answer><answer>5</answer>", False),  # two answers
    ("<think>a</think><answer>4<think>x</think></answer>", False),  # tag spoofed inside the answer
    ("<think>a</think><answer>4</answer> trailing", False),  # text after the answer
    ("preamble <think>a</think><answer>4</answer>", False),  # text before think
    ("<think>a</think> between <answer>4</answer>", False),  # text between
    ("<think>a</think><answer>4", False),  # unclosed answer
    ("<think>a<answer>4</answer>", False),  # unclosed think
    ("<THINK>a</THINK><ANSWER>4</ANSWER>", True),  # case-insensitive tags
    ("<think>a</think><answer>4</answer >", True),  # space before >
    ("&lt;think&gt;a&lt;/think&gt;<answer>4</answer>", False),  # escaped tags are not tags
]


@pytest.mark.parametrize("completion,ok", THINK_ANSWER)
def test_think_answer_structure(completion, ok):
    v = TA.verify(completion)
    assert (v.status is Status.CORRECT) is ok and v.score == (1.0 if ok else 0.0), v.detail


@pytest.mark.parametrize("completion,ok", [
    ("so \\boxed{4}", True), ("\\boxed{4} and \\boxed{5}", False), ("\\boxed{}", False), ("4", False),
])
def test_boxed_rule(completion, ok):
    assert (Boxed().verify(completion).status is Status.CORRECT) is ok


@pytest.mark.parametrize("length,score", [(0, 0.0), (768, 0.0), (769, -1 / 256), (896, -0.5), (1024, -1.0),
                                          (5000, -1.0)])
def test_soft_overlong_penalty(length, score):
    v = SoftLength().verify("x" * length, max_length=1024, cache_length=256)
    assert v.score == pytest.approx(score)


def test_soft_length_bad_options_are_an_error():
    with pytest.raises(ValueError, match="cache_length"):
        SoftLength().verify("x", max_length=10, cache_length=20)


def test_repetition_penalty():
    assert Repetition().verify("a b c d e f").score == 0.0
    v = Repetition().verify("a b c a b c a b c")
    assert -1.0 <= v.score < -0.5


# ---------------------------------------------------------------- composition
def _v(status, score=None):
    return Verdict(status, score)


def test_composite_is_weighted_and_weight_zero_is_only_logged():
    r = Reward((Term("math", 1.0), Term("think_answer", 0.2), Term("repetition", 0.0)), outcome="math")
    v = {"math": _v(Status.CORRECT, 1.0), "think_answer": _v(Status.INCORRECT, 0.0),
         "repetition": _v(Status.ERROR)}
    assert r.combine(v) == pytest.approx(1.0)  # the weight-0 term's ERROR does not mask the sample
    v["think_answer"] = _v(Status.CORRECT, 1.0)
    assert r.combine(v) == pytest.approx(1.2)
    assert r.passed(v) is True


@pytest.mark.parametrize("masked", [Status.TIMEOUT, Status.ERROR, Status.ABSTAIN])
def test_masked_outcome_or_weighted_term_masks_the_composite(masked):
    r = Reward((Term("math", 1.0), Term("think_answer", 0.5)), outcome="math")
    assert r.combine({"math": _v(masked), "think_answer": _v(Status.CORRECT, 1.0)}) is None
    assert r.combine({"math": _v(Status.CORRECT, 1.0), "think_answer": _v(masked)}) is None
    assert r.passed({"math": _v(masked), "think_answer": _v(Status.CORRECT, 1.0)}) is None


def test_reward_declaration_errors():
    with pytest.raises(ValueError, match="outcome"):
        Reward((Term("math"),), outcome="think_answer")
    with pytest.raises(ValueError, match="twice"):
        Reward((Term("math"), Term("math")), outcome="math")
    with pytest.raises(KeyError, match="valid"):
        Reward((Term("maths"),), outcome="maths")


@pytest.mark.timeout(120)
def test_reward_verifies_through_the_runtime():
    r = Reward((Term("math", 1.0), Term("think_answer", 0.1)), outcome="math")
    comps = ["<think>x</think><answer>4</answer>", "\\boxed{5}", ""]
    out = r.verify(comps, ["4", "4", "4"])
    assert [o["math"].status for o in out] == [Status.CORRECT, Status.INCORRECT, Status.UNPARSEABLE]
    assert [r.combine(o) for o in out] == [pytest.approx(1.1), 0.0, 0.0]


# ---------------------------------------------------------------- TRL adapter
@pytest.mark.timeout(120)
def test_trl_reward_function_contract():
    fn = as_trl_reward("math")
    out = fn(prompts=["1+1=", "2+2="], completions=["2", "5"], answer=["2", "4"])
    assert out == [1.0, 0.0] and fn.__name__ == "math"
    chat = fn(prompts=[[{"role": "user", "content": "1+1="}]],
              completions=[[{"role": "assistant", "content": "The answer is 2"}]], answer=["2"])
    assert chat == [1.0]
    masked = fn(prompts=["q"], completions=["2"], answer=["@@@"])  # unusable reference: None, not 0
    assert masked == [None]
    with pytest.raises(ValueError, match="column 'answer'"):
        fn(prompts=["q"], completions=["2"], solution=["2"])


@pytest.mark.timeout(300)
def test_trl_grpo_trainer_trains_a_step_with_our_reward(tmp_path):
    """TRL's real GRPOTrainer, our verifier as its reward function, one optimiser step."""
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.load import build_tiny

    model, tok = build_tiny(config.load(Config, overrides=["model.tiny.num_layers=1"]))
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    ds = Dataset.from_list([{"prompt": f"{a}+{a}=", "answer": str(2 * a)} for a in range(8)])
    args = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=4, max_steps=1, report_to="none", use_cpu=True, bf16=False,
                      logging_steps=1, save_strategy="no")
    trainer = GRPOTrainer(model=str(tmp_path / "m"), reward_funcs=as_trl_reward("math"), args=args,
                          train_dataset=ds, processing_class=tok)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert logs and "rewards/math/mean" in logs[0]
    changed = any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))
    assert changed or logs[0]["reward_std"] == 0  # a step happened (or every group was uniform)
