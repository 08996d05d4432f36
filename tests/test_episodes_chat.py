"""Episodes in the chat format: the environment's tools in the prompt, a structured tool call, and each episode's
ids checked against the chat template's rendering of the whole conversation (a mismatch reported, never hidden).
"""
from __future__ import annotations

import pytest

from reasoning_rl.rollout.episodes import EpisodeLimits, run_episodes
from tests.helpers.episodes import call, record_sampling, sampling as _sampling, tiny, tool  # noqa: F401 - tiny, tool are fixtures
from tests.helpers.turns import EveryTurnIsACall

pytestmark = pytest.mark.timeout(300)


# A ChatML template in the style of Qwen's, written here: a tool message is a user turn wrapped in <tool_response>
QWENISH = ("{% for m in messages %}{% if m['role'] == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m['content'] }}"
           "\n</tool_response><|im_end|>\n{% else %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endif %}"
           "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
# ... and one that keeps only the last assistant turn's words (as templates that drop earlier reasoning do)
FORGETFUL = ("{% for m in messages %}{% if m['role'] == 'assistant' and not loop.last %}<|im_start|>assistant\n"
             "<|im_end|>\n{% else %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endif %}{% endfor %}"
             "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def smollm2():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reasoning_rl.models.sources import resolve

    path = resolve("smollm2-135m-instruct", log=lambda *_: None)
    return AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


def test_the_prompt_shows_the_environments_tools_in_the_chat_format(tiny):
    """With tool_format chat and an environment that declares TOOLS, the task renders every prompt with the schemas
    (apply_chat_template's tools=), keeps them on the row for the episodes' template check, and the archive leaves
    them out; in the text format, or without tools, prompts are as before."""
    import copy

    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.rollout.environments import prompt_tools
    from reasoning_rl.task.task import Task

    _, tok = tiny
    tok = copy.deepcopy(tok)
    tok.chat_template = ("{% if tools %}[tools: {{ tools | map(attribute='function') | map(attribute='name') "
                         "| join(',') }}]{% endif %}{% for m in messages %}{{ m['content'] }}{% endfor %}")
    for fmt, shown in (("chat", True), ("text", False)):
        cfg = config.load(Config, overrides=["grpo.environment=python", f"grpo.tool_format={fmt}"])
        task = Task.from_config(cfg.tasks)
        task.render(tok, tools=prompt_tools(cfg.grpo))
        row = task.rows("train")[0]
        assert row["prompt"].startswith("[tools: python]") is shown and ("tools" in row) is shown
    assert prompt_tools(config.load(Config).grpo) is None


# a Hermes/Qwen-style template that renders an assistant turn's structured tool calls as <tool_call> JSON
TOOLISH = ("{% for m in messages %}{% if m['role'] == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m['content'] }}"
           "\n</tool_response><|im_end|>\n{% elif m['role'] == 'assistant' and m.get('tool_calls') %}<|im_start|>"
           "assistant\n{% if m['content'] %}{{ m['content'] }}\n{% endif %}{% for c in m['tool_calls'] %}<tool_call>\n"
           "{\"name\": \"{{ c['function']['name'] }}\", \"arguments\": {{ c['function']['arguments'] | tojson }}}"
           "\n</tool_call>{% endfor %}<|im_end|>\n{% else %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
           "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


class Scripted:
    """An engine that answers each turn with a fixed text (then <|im_end|>): the model's words are given, so the test
    is of what the runner, the tool and the template make of them. Log-probs 0.0."""

    def __init__(self, tok, turns):
        end = tok.convert_tokens_to_ids("<|im_end|>")
        self.turns = [tok(t, add_special_tokens=False)["input_ids"] + [end] for t in turns]

    def continue_ids(self, seqs, max_new, stops, sampling, seeds=None, keys=None):
        ids = self.turns.pop(0)
        return [(ids, [0.0] * len(ids)) for _ in seqs]


@pytest.fixture(scope="module")
def smollm2_tok():
    from transformers import AutoTokenizer

    from reasoning_rl.models.sources import resolve

    return AutoTokenizer.from_pretrained(resolve("smollm2-135m-instruct", log=lambda *_: None))


CALL = '<tool_call>\n{"name": "python", "arguments": {"code": "print(6 * 7)"}}\n</tool_call>'


def _qwen3():
    """The Qwen3 template TRL ships (the one it trains Qwen3 tool use with); the case is skipped if TRL moves it."""
    try:
        from trl.chat_template_utils import qwen3_chat_template
    except ImportError:
        pytest.skip("this TRL ships no trl.chat_template_utils.qwen3_chat_template")
    return qwen3_chat_template


@pytest.mark.slow  # SmolLM2's tokenizer (the model converted once, about half a minute on a fresh machine)
@pytest.mark.timeout(300)
@pytest.mark.parametrize("template, tools, call, mismatch", [
    (TOOLISH, False, CALL, False),  # written as the template writes it: the episode is the template's conversation
    (TOOLISH, False, CALL.replace('": ', '":'), True),  # without spaces: run, trained as sampled, and reported
    # Qwen3's template (as TRL ships it), the tool's schema in its system prompt: the tool turn splices exactly; the
    # template renders the last assistant turn with an empty think block the model never wrote, which is reported
    (None, True, CALL, "last turn"),
])
def test_a_structured_tool_call_runs_and_is_checked_against_the_templates_rendering(tool, smollm2_tok, template,
                                                                                    tools, call, mismatch):
    """tool_format chat with the template's own call format: the model's <tool_call> JSON runs on the sandbox, the
    turn joins the conversation as a structured `tool_calls` message, and the episode's ids are compared with the
    template's rendering of that conversation (a call the template would write differently is reported)."""
    import copy

    from reasoning_rl.rollout.environments import PythonTool
    from reasoning_rl.rollout import SamplingConfig

    tok = copy.deepcopy(smollm2_tok)
    tok.chat_template = template or _qwen3()
    messages = [{"role": "user", "content": "What is 6 * 7?"}]
    schemas = PythonTool.TOOLS if tools else None
    row = {"prompt_id": "a", "messages": messages, **({"tools": schemas} if tools else {}),
           "prompt": tok.apply_chat_template(messages, tools=schemas, tokenize=False, add_generation_prompt=True)}
    assert ("python" in row["prompt"]) is tools  # the schema is in the prompt only when given
    engine = Scripted(tok, ["Let me compute.\n" + call, "The answer is \\boxed{42}."])
    end = tok.convert_tokens_to_ids("<|im_end|>")
    (e,) = run_episodes(None, tok, tool, [row], SamplingConfig(temperature=0.0, max_tokens=64),
                        EpisodeLimits(max_turns=3, max_tool_calls=2, max_episode_tokens=300, tool_format="chat"),
                        stop_ids=[end], engine=engine)
    assert e.reason == "answer" and e.tool_calls == 1 and "42" in e.turns[0].observation
    assert e.conv[1] == {"role": "assistant", "content": "Let me compute.", "tool_calls": [
        {"type": "function", "function": {"name": "python", "arguments": {"code": "print(6 * 7)"}}}]}
    assert e.conv[2] == {"role": "tool", "content": e.turns[0].observation}
    if mismatch == "last turn":  # everything up to the final turn is the template's conversation
        assert e.turns[-1].template_mismatch == len(e.prompt_ids) + len(e.ids) - e.turns[-1].tokens
        return
    assert (e.turns[-1].template_mismatch is not None) is mismatch
    if not mismatch:  # token for token the template's conversation (which closes the last turn with a newline)
        full = tok.apply_chat_template(e.conv, tools=schemas, tokenize=True)
        full = list(full["input_ids"] if hasattr(full, "keys") else full)
        assert e.prompt_ids + e.ids + tok("\n", add_special_tokens=False)["input_ids"] == full


@pytest.mark.slow  # the real model (converted once, about half a minute on a fresh machine) and a few greedy turns
@pytest.mark.timeout(600)
@pytest.mark.parametrize("template, tool_message", [
    (None, "<|im_start|>tool\n{}<|im_end|>\n"),  # SmolLM2's own: a `tool` role turn
    (QWENISH, "<|im_start|>user\n<tool_response>\n{}\n</tool_response><|im_end|>\n"),
])
def test_chat_format_episodes_are_the_templates_conversation_token_for_token(smollm2, monkeypatch, template,
                                                                             tool_message):
    """tool_format chat on the real model: each turn ends at the model's <|im_end|>; the observation is the
    template's tool message and the next assistant header, tokenized once; the whole episode's ids are
    apply_chat_template of the conversation (no mismatch reported), and the sampled ids are kept as sampled."""
    import copy

    from reasoning_rl.rollout import SamplingConfig

    model, tok = smollm2
    if template:
        tok = copy.deepcopy(tok)
        tok.chat_template = template
    sampled = record_sampling(monkeypatch)
    messages = [{"role": "user", "content": "What is 2+2? Answer with the number only."}]
    row = {"prompt_id": "a", "messages": messages,
           "prompt": tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)}
    limits = EpisodeLimits(max_turns=2, max_tool_calls=1, max_episode_tokens=200, tool_format="chat")
    (e,) = run_episodes(model, tok, EveryTurnIsACall(), [row], SamplingConfig(temperature=0.0, max_tokens=24), limits)
    end = tok.convert_tokens_to_ids("<|im_end|>")
    first = sampled[0][0]
    assert first[-1] == end, "the first turn must end the model's turn for the test to mean anything"
    obs = tok("\n" + tool_message.format(EveryTurnIsACall.OBS) + "<|im_start|>assistant\n",
              add_special_tokens=False)["input_ids"]
    assert e.ids == first + obs + sampled[1][0][:len(e.ids) - len(first) - len(obs)]
    assert e.loss_mask == [1] * len(first) + [0] * len(obs) + [1] * (len(e.ids) - len(first) - len(obs))
    assert e.conv[1] == {"role": "assistant", "content": tok.decode(first[:-1], skip_special_tokens=False)}
    assert e.conv[2] == {"role": "tool", "content": EveryTurnIsACall.OBS}
    assert all(t.template_mismatch is None for t in e.turns)
    full = tok.apply_chat_template(e.conv, tokenize=True)
    full = list(full["input_ids"] if hasattr(full, "keys") else full)
    assert full[:len(e.prompt_ids) + len(e.ids)] == e.prompt_ids + e.ids


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_template_that_rewrites_earlier_turns_is_reported_not_hidden(smollm2):
    import copy

    from reasoning_rl.rollout.episodes import episode_metrics
    from reasoning_rl.rollout import SamplingConfig

    model, tok = smollm2
    tok = copy.deepcopy(tok)
    tok.chat_template = FORGETFUL
    messages = [{"role": "user", "content": "What is 2+2? Answer with the number only."}]
    row = {"prompt_id": "a", "messages": messages,
           "prompt": tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)}
    limits = EpisodeLimits(max_turns=2, max_tool_calls=1, max_episode_tokens=200, tool_format="chat")
    (e,) = run_episodes(model, tok, EveryTurnIsACall(), [row], SamplingConfig(temperature=0.0, max_tokens=24), limits)
    # the first assistant turn's words are where the template and the episode part
    assert e.turns[-1].template_mismatch == len(e.prompt_ids)
    assert episode_metrics([e.sample()])["tools/template_mismatch"] == 1.0


def test_chat_format_needs_the_chat_messages(tiny):
    from reasoning_rl.errors import UserError

    model, tok = tiny
    with pytest.raises(UserError, match="grpo.tool_format: value 'chat'"):
        run_episodes(model, tok, EveryTurnIsACall(), [{"prompt_id": "a", "prompt": "1+1="}], _sampling(),
                     EpisodeLimits(tool_format="chat"))
