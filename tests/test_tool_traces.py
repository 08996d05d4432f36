"""Generated tool traces for a cold start (task/embedded/tool_problems.py, data/tool_traces.py), checked on the real
model's tokenizer and the real sandbox: every problem's program prints its answer and the prompt never holds it;
every trace's tool output is what the sandbox prints for that program, every final answer passes `math`, and the
loss mask is 0 on exactly the tool's output; `sft --samples` reads the traces as episodes."""
from __future__ import annotations

import contextlib
import io
import json
import re

import pytest

from reasoning_rl.data.tool_traces import make_traces, write_traces
from reasoning_rl.data.verified import read_targets
from reasoning_rl.rollout.environments import PythonTool
from reasoning_rl.task.embedded.tool_problems import FAMILIES, GENERATORS, problems

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("scale", [1, 2])
def test_each_program_prints_its_answer_and_no_prompt_holds_it(scale):
    for p in problems(60, seed=3, scale=scale, families=tuple(GENERATORS)):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(p.code, "<problem>", "exec"), {})  # our own generated program, trusted
        assert out.getvalue().strip() == str(p.answer), p
        assert str(p.answer) not in re.findall(r"\d+", p.prompt.replace(",", "")), p  # never given away
    held = {p.prompt for p in problems(40, seed=3, scale=2)}
    assert not held & {p.prompt for p in problems(40, seed=3, scale=1)}  # bigger numbers held out


@pytest.fixture(scope="module")
def tok():
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.load import load_tokenizer

    return load_tokenizer(config.load(Config, overrides=["model.name_or_path=smollm2-135m-instruct"]))


@pytest.fixture(scope="module")
def tool():
    t = PythonTool()
    yield t
    t.shutdown()


def test_traces_hold_the_sandboxs_own_output_and_pass_the_verifier(tok, tool):
    ps = problems(10, seed=5)
    end = tok.convert_tokens_to_ids("<|im_end|>")
    groups = make_traces(ps, tok, tool, end_ids=[end])
    assert len(groups) == len(ps) and {g.row["family"] for g in groups} == set(FAMILIES)
    for g, p in zip(groups, ps):
        s = g.samples[0]
        assert s.verdicts["math"].status.value == "correct", (s.text, p.answer)
        call = s.turns[0]
        # the observation is what the sandbox prints for the program, run again here on its own
        again = tool.respond([tool.start({"prompt_id": f"again-{g.prompt_id}"})], [f"```python\n{p.code}\n```"])[0]
        assert call.observation == again.observation and str(p.answer) in call.observation
        # the loss mask is 0 on exactly the tool's output: those tokens decode to the observation
        masked = [t for t, m in zip(s.token_ids, s.loss_mask) if m == 0]
        assert tok.decode(masked) == call.observation
        assert s.token_ids[-1] == end and s.loss_mask[-1] == 1  # the model ends its turn, and is trained to
        assert str(p.answer) not in re.findall(r"\d+", g.prompt.replace(",", ""))  # nor the rendered prompt


def test_chat_format_traces_call_through_the_template(tok, tool):
    """tool_format chat (for a model RL runs with grpo.tool_format=chat, and for TRL, which parses only the
    template's call): the prompt shows the tool's schema, the first turn is the template's structured call ended by
    the end-of-turn token, the sandbox's output comes back as the template's tool message (its tokens, and only
    they, at loss mask 0), and the answer passes `math`."""
    import copy
    import json

    from trl.chat_template_utils import qwen3_chat_template

    from reasoning_rl.rollout.environments import _first_call

    qtok = copy.deepcopy(tok)
    qtok.chat_template = qwen3_chat_template
    ps = problems(6, seed=5)
    end = qtok.convert_tokens_to_ids("<|im_end|>")
    groups = make_traces(ps, qtok, tool, end_ids=[end], tool_format="chat")
    assert len(groups) == len(ps)
    for g, p in zip(groups, ps):
        s = g.samples[0]
        assert '"name": "python"' in g.prompt and "<tools>" in g.prompt  # the schema, through the template
        assert s.verdicts["math"].status.value == "correct", (s.text, p.answer)
        first = s.turns[0]
        assert json.loads(s.text.split("<tool_call>")[1].split("</tool_call>")[0]) == \
            {"name": "python", "arguments": {"code": p.code}}
        again = tool.respond([tool.start({"prompt_id": f"chat-{g.prompt_id}"})], [f"```python\n{p.code}\n```"])[0]
        assert first.observation == again.observation
        masked = qtok.decode([t for t, m in zip(s.token_ids, s.loss_mask) if m == 0])
        assert masked == f"\n<|im_start|>user\n<tool_response>\n{first.observation}\n</tool_response><|im_end|>\n" \
                         f"<|im_start|>assistant\n"  # Qwen3's tool message and the next assistant header
        cut = s.token_ids.index(end) + 1  # the first turn ends at the model's end of turn, trained on
        found = _first_call(qtok.decode(s.token_ids[:cut - 1]))  # the environment reads it as a structured call
        assert s.loss_mask[cut - 1] == 1 and found is not None and found[1] == {"name": "python",
                                                                                "arguments": {"code": p.code}}


def test_direct_families_are_answered_without_a_call_the_others_call(tok, tool):
    """`direct=("easy",)`: the one-digit sums are one turn with no call and no masked token, the answer worked out
    and boxed (it passes `math`); the tool families still call, as without `direct`."""
    ps = problems(12, seed=4, families=(*FAMILIES, "easy"))
    end = tok.convert_tokens_to_ids("<|im_end|>")
    groups = make_traces(ps, tok, tool, end_ids=[end], direct=("easy",))
    assert len(groups) == len(ps) and sum(p.family == "easy" for p in ps) == 2
    for g, p in zip(groups, ps):
        s = g.samples[0]
        assert s.verdicts["math"].status.value == "correct", (s.text, p.answer)
        if p.family == "easy":
            a, b = re.findall(r"\d+", p.prompt)[:2]
            assert s.text == f"{a} plus {b} is {p.answer}, so the answer is \\boxed{{{p.answer}}}."
            assert len(s.turns) == 1 and not s.turns[0].call and set(s.loss_mask) == {1} and s.token_ids[-1] == end
        else:
            assert s.turns[0].call and 0 in s.loss_mask


def test_sft_reads_the_traces_as_episodes(tok, tool, tmp_path):
    summary = write_traces(problems(6, seed=9), tok, str(tmp_path), tool,
                           end_ids=[tok.convert_tokens_to_ids("<|im_end|>")])
    assert summary.written == 6 and summary.left_out == 0
    targets, info = read_targets(summary.path)
    assert info.targets == 6 and info.verifier == "math"
    for t in targets:
        assert t.ids and len(t.ids) == len(t.loss_mask) and 0 in t.loss_mask and t.loss_mask[-1] == 1
    assert json.loads((tmp_path / "task.json").read_text())["outcome"] == "math"


def test_an_unknown_family_is_one_line(tmp_path):
    import subprocess
    import sys

    from .conftest import ROOT, run_env

    r = subprocess.run([sys.executable, "-m", "reasoning_rl", "traces", "-n", "2", "--families", "products,riddles",
                        "-o", str(tmp_path)], capture_output=True, text=True, cwd=ROOT, env=run_env(), timeout=120)
    assert r.returncode == 2 and "traces --families: unknown family 'riddles'" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = subprocess.run([sys.executable, "-m", "reasoning_rl", "traces", "-n", "2", "--direct", "easy", "-o",
                        str(tmp_path)], capture_output=True, text=True, cwd=ROOT, env=run_env(), timeout=120)
    assert r.returncode == 2 and "traces --direct: family 'easy' is not among --families (products, sums, " in r.stderr


@pytest.mark.timeout(60)
def test_a_family_that_runs_out_of_distinct_problems_says_so_instead_of_looping():
    """600 problems over six families ask 100 of `easy` (it used to have 64 distinct ones, and the loop never ended);
    a family that can only repeat itself is one line, not a hang."""
    from reasoning_rl.task.embedded import tool_problems as tp

    rows = tp.problems(600, 100, scale=2, families=(*tp.FAMILIES, "easy"))
    assert len({p.prompt for p in rows}) == 600 and sum(p.family == "easy" for p in rows) == 100
    with pytest.raises(ValueError, match=r"family 'choose' at scale 1 gave \d+ distinct problems and then only "
                                         r"repeats \(1000 in a row\); ask for fewer than 5000 problems"):
        tp.problems(5000, 0, scale=1, families=("choose",))  # at most 12 x 5 x 4 at scale 1


@pytest.mark.slow  # the real model: `demo --tools` at a few steps (a few minutes)
@pytest.mark.timeout(1500)
def test_the_tool_demo_cold_starts_the_real_model_then_trains_it_with_the_tool(tmp_path):
    """`reasoning-rl demo --model smollm2-135m-instruct --tools`, shrunk: traces, the cold start (a full model in
    cold/), a GRPO round with the Python tool whose episodes call it with the tool's tokens masked, and held-out
    episodes before and after with their tool figures in the log and in metrics.jsonl."""
    import subprocess
    import sys

    from .conftest import ROOT, run_env

    out = tmp_path / "demo"
    r = subprocess.run([sys.executable, "-m", "reasoning_rl", "demo", "--model", "smollm2-135m-instruct", "--tools",
                        "--traces", "32", "--set", "sft.steps=16", "--set", "sft.warmup_steps=2", "--set",
                        "grpo.steps=1", "--set", "grpo.eval_every=1", "--set", "grpo.prompts_per_step=4", "--set",
                        "grpo.group_size=4", "--set", "eval.size=6", "--set", f"output_dir={out}"],
                       capture_output=True, text=True, cwd=ROOT, env=run_env(), timeout=1400)  # threads: its share
    assert r.returncode == 0, r.stderr[-3000:]
    said = r.stdout + r.stderr
    assert "32 tool traces written" in said and re.search(r"held-out accuracy \(6 problems.*cold start \d\.\d{3}", said)
    assert re.search(r"tool calls per episode \d\.\d\d -> \d\.\d\d", said), said[-2000:]
    assert (out / "cold" / "config.json").exists() and (out / "held_out.jsonl").exists()
    traces = [json.loads(x) for x in (out / "traces" / "samples.jsonl").read_text().splitlines()]
    calls = [0 in x["loss_mask"] for x in traces]  # a call's output is masked; a direct answer is trained whole
    assert any(calls) and not all(calls)  # the easy sums are written direct: the cold start shows when not to call
    evals = [m for m in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if "eval/accuracy" in m]
    assert len(evals) == 2 and evals[0]["eval/tool_calls"] > 0  # the cold-started model calls on held-out problems
    assert 0.0 <= evals[0]["eval/tool_ok"] <= 1.0
    lines = [json.loads(x) for x in (out / "archive.jsonl").read_text().splitlines()]
    called = [x for x in lines if any(t.get("observation") for t in x.get("turns", []))]
    assert called, "no training episode called the tool after the cold start"
    assert all(0 in x["loss_mask"] and 1 in x["loss_mask"] for x in called)
