"""The environments on their own: the Python tool on the real sandbox (one interpreter per episode, limits, a
failing sandbox masked, the reference never reachable), the registry and a user's environment, the calculator.

Adversarial programs run only inside the sandbox's limits (per call: 2-5 s wall and CPU, 256 MiB, its process
cap), with each test's own timeout as the second net.
"""
from __future__ import annotations

import pytest

from reasoning_rl.rollout.environments import ENVIRONMENTS, Environment, PythonTool, Step
from tests.helpers.episodes import call, tool  # noqa: F401 - tool is a fixture

pytestmark = pytest.mark.timeout(300)


# (cells run one after another in one episode, what the last observation shows)
REPL = [
    (["x = 6 * 7", "print(x)"], "42"),  # a name defined in one call exists in the next
    (["x = 6 * 7", "x + 1"], "43"),  # the last expression's value, as a REPL shows it
    (["def f(n):\n    return 1 / n", "f(0)"], "ZeroDivisionError: division by zero"),  # the program's own error
    (["import math", "math.sqrt(2) > 1.41"], "True"),
    (["y = 1", "1/0", "y + 1"], "2"),  # a failed cell does not break the state
    # the declared packages (default numpy and sympy): a tool-integrated math trace's first line works
    (["from sympy import *", "x = symbols('x')", "solve(x**2 - 4, x)"], "[-2, 2]"),
    (["import numpy as np", "int(np.dot([1, 2], [3, 4]))"], "11"),
]


@pytest.mark.parametrize("cells,shown", REPL)
def test_one_interpreter_per_episode(tool, cells, shown):
    st = tool.start({"prompt_id": "p"})
    for c in cells:
        step = tool.respond([st], [call(c)])[0]
    assert shown in step.observation and step.observation.startswith("```output\n") and step.tool_call


# (a structured call as a chat template writes it, what its observation shows): the call runs, or its fault is a REPL
# error the model can read
STRUCTURED = [
    ('<tool_call>\n{"name": "python", "arguments": {"code": "x = 6 * 7\\nx"}}\n</tool_call>', "42"),
    ('<tool_call>{"name": "python", "arguments": "{\\"code\\": \\"print(3)\\"}"}</tool_call>', "3"),  # string args
    ('<tool_call>{"name": "calc", "arguments": {"code": "1"}}</tool_call>', "no tool named 'calc'"),
    ('<tool_call>{"name": "python", "arguments": {"expr": "1"}}</tool_call>', "takes one argument, code"),
    ("<tool_call>print(1)</tool_call>", "the tool call is not a JSON object"),
]


@pytest.mark.parametrize("call,shown", STRUCTURED)
def test_a_structured_tool_call_is_a_call(tool, call, shown):
    segment = "Let me compute.\n" + call + "\nand then more words"
    assert tool.call_end(segment) == len("Let me compute.\n" + call)  # the segment is cut right after the call
    step = tool.respond([tool.start({"prompt_id": "s"})], [segment])[0]
    assert step.tool_call and not step.failed and shown in step.observation


def test_episodes_never_share_state(tool):
    a, b = tool.start({"prompt_id": "a"}), tool.start({"prompt_id": "b"})
    planted = "import os\nSECRET = 7319\nopen('/tmp/planted', 'w').write('7319')\nos.environ['PLANTED'] = '1'"
    tool.respond([a], [call(planted)])
    probe = ("import os\nprint(globals().get('SECRET'), os.path.exists('/tmp/planted'), os.environ.get('PLANTED'), "
             "os.path.exists('/work/planted'))")
    out = tool.respond([b], [call(probe)])[0].observation
    assert "None False None False" in out


def test_the_reference_answer_is_nowhere_the_program_can_look(tool):
    """The row holds the reference; the environment never passes it to the sandbox: a program searching files,
    environment and its own memory for it finds nothing."""
    row = {"prompt_id": "q", "prompt": "What is 3 + 4?", "reference": "ANSWER-73191"}
    st = tool.start(row)
    snoop = ("import os, gc\nhits = []\n"
             "for root in ('/work', '/tmp', '/etc', '/dev/shm'):\n"
             "    for d, _, fs in os.walk(root):\n"
             "        for f in fs:\n"
             "            try:\n"
             "                hits += [os.path.join(d, f)] if 'ANSWER-73191' in open(os.path.join(d, f), errors='ignore').read() else []\n"
             "            except OSError:\n"
             "                pass\n"
             "hits += [k for k, v in os.environ.items() if 'ANSWER-73191' in v]\n"
             "hits += ['memory' for o in gc.get_objects() if isinstance(o, str) and 'ANSWER-7319' + '1' in o]\n"
             "print('found:', hits)")
    out = tool.respond([st], [call(snoop)])[0].observation
    assert "found: []" in out


# (a program that breaks its interpreter or its limits, what the model is shown)
BREAKERS = [
    ("while True:\n    pass", "TimeoutError"),  # CPU spinner: the call's own time limit
    ("import time\ntime.sleep(60)", "TimeoutError"),  # wall clock
    ("x = bytearray(2 * 1024 ** 3)", "MemoryError"),  # memory bomb, caught by the interpreter or the cgroup
    ("import os\nos._exit(3)", "the interpreter died (exit 3"),
    ("print('y' * 5000)", "[output truncated at 1000 characters]"),
    ("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        break\nprint('done')", ""),  # fork bomb
]


@pytest.mark.parametrize("code,shown", BREAKERS)
def test_a_program_that_breaks_its_limits_gets_a_repl_error_and_the_next_call_works(tool, code, shown):
    st = tool.start({"prompt_id": "b"})
    tool.respond([st], [call("z = 5")])
    step = tool.respond([st], [call(code)])[0]
    assert not step.failed and shown in step.observation, step
    assert "5" in tool.respond([st], [call("z")])[0].observation  # the episode goes on with its state


def test_a_sandbox_that_fails_masks_the_samples_never_a_zero(tool, monkeypatch):
    from sandboxes import SandboxError

    class Broken:
        def run_many(self, programs, limits):
            raise SandboxError("could not start the sandbox")

    env = PythonTool()
    monkeypatch.setattr(env, "_sandboxes", lambda: Broken())
    a, b = env.start({"prompt_id": "a"}), env.start({"prompt_id": "b"})
    steps = env.respond([a, b], [call("1 + 1"), "The answer is 2."])
    assert steps[0].failed and "could not start the sandbox" in steps[0].reason and steps[0].observation == ""
    assert not steps[1].failed and steps[1].done and steps[1].reason == "answer"


def test_the_registry_and_a_users_environment():
    assert "python" in ENVIRONMENTS.names() and ENVIRONMENTS.get("python") is PythonTool

    class Echo(Environment):
        name = "echo"

        def call_end(self, text):
            i = text.find("CALL")
            return None if i < 0 else i + 4

        def respond(self, states, segments):
            return [Step(observation=" OK ", tool_call=True) for _ in segments]

    ENVIRONMENTS.add("echo-test", Echo, "tests")
    try:
        assert ENVIRONMENTS.get("echo-test")().call_end("a CALL b") == 6
    finally:
        ENVIRONMENTS.remove("echo-test")



def test_the_calculator_answers_integer_arithmetic_and_refuses_the_rest():
    env = ENVIRONMENTS.get("calculator")()
    ok, power, zero, prose, none = env.respond([None] * 5, ["37*48=<<37*48>>", "<<9**9**9>>", "<<1//0>>",
                                                           "<<open('/etc/passwd')>>", "1776"])
    assert ok.observation == "=1776\n" and not ok.program_error
    assert power.program_error and zero.program_error and prose.program_error  # shown to the model, not run
    assert none.done and none.reason == "answer"
    assert env.call_end("37*48=<<37*48>>=1776") == len("37*48=<<37*48>>")


def test_tool_traces_are_what_the_calculator_answers():
    """The warm start's traces (sft.tool_fraction) read as an episode would: the call, the calculator's own answer,
    then the answer; and the knob at 0 leaves the SFT cache key of older checkpoints unchanged."""
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.sft import sft_cache_dir
    from reasoning_rl.task.embedded.arithmetic import tool_solution

    trace = tool_solution({"prompt": "37*48=", "answer": "1776"})
    call = trace[: ENVIRONMENTS.get("calculator")().call_end(trace)]
    assert trace == call + ENVIRONMENTS.get("calculator")().respond([None], [call])[0].observation + "1776"
    assert tool_solution({"prompt": "def f():", "answer": "", "tests": []}) is None
    base = config.load(Config)
    assert sft_cache_dir(base) == sft_cache_dir(config.load(Config, overrides=["sft.tool_fraction=0.0"]))
    assert sft_cache_dir(base) != sft_cache_dir(config.load(Config, overrides=["sft.tool_fraction=0.5"]))
