"""The suite's way of running as another machine (tests/machine_as/as_machine.py): its settings parsed strictly, a
forced kernel combination less what the model cannot run, and the settings reaching a `python -m reasoning_rl`
subprocess through run_env's sitecustomize."""
import subprocess

import pytest

from tests.conftest import PY, ROOT, run_env
from tests.machine_as import as_machine


# (the variable's text, the settings it gives, or the error's words)
SETTINGS = [
    ("", {}),
    ("kernels=draw+buffer threads=2", {"kernels": "draw+buffer", "threads": "2"}),
    ("allocator=system", {"allocator": "system"}),
    ("kernel=draw", "kernel=draw"),      # a misspelt key must not run as this machine and call it another
    ("threads=", "threads="),
]


@pytest.mark.parametrize("text,expected", SETTINGS)
def test_settings_are_read_strictly(text, expected):
    if isinstance(expected, dict):
        assert as_machine.settings(text) == expected
    else:
        with pytest.raises(ValueError, match=expected):
            as_machine.settings(text)


def test_a_forced_combination_keeps_only_what_the_model_can_run():
    from reasoning_rl.rollout.kernel_choice import Kernels, name_of

    possible = Kernels(pack=True, draw=True, attend=True, buffer=True, step=False)  # a model without the fused step
    assert name_of(as_machine.forced_kernels("packed+draw+attention+buffer+step", possible)) == \
        "packed+draw+attention+buffer"
    assert name_of(as_machine.forced_kernels("eager", possible)) == "eager"
    with pytest.raises(ValueError, match="fused"):
        as_machine.forced_kernels("fused", possible)


def test_the_settings_reach_a_command_subprocess_and_nothing_else():
    env = run_env(REASONING_RL_TEST_AS="threads=3")
    plain = "from reasoning_rl.models import device; print('threads', device.resolve_threads(0, 'tiny'))"
    command = "import importlib.util; importlib.util.find_spec('reasoning_rl.__main__'); " + plain  # as -m does
    for code, threads in ((plain, 1), (command, 3)):  # a plain program untouched; a command's process forced
        r = subprocess.run([PY, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
        assert r.returncode == 0 and f"threads {threads}" in r.stdout, (code, r.stdout, r.stderr)
