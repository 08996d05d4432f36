"""Two processes of the project on one machine share its cores instead of each taking them all, and a run that
slows several-fold while the machine is busy says so once."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from reasoning_rl.models.device import _registry, share_of_cores
from reasoning_rl.trainers.log_lines import Slowdown

from .conftest import run_env


def test_the_cores_are_divided_among_the_projects_running_processes(tmp_path, monkeypatch):
    # a registry of this test's own: the project's runs elsewhere on the machine (a bench) are not counted here
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    cores = len(os.sched_getaffinity(0))
    os.makedirs(_registry(), exist_ok=True)
    ghost = os.path.join(_registry(), "999999999")  # a process that is gone: not counted, its file removed
    with open(ghost, "w") as f:
        f.write("12345")
    other = subprocess.Popen([sys.executable, "-c", "from reasoning_rl.models.device import share_of_cores; "
                              "print(share_of_cores(), flush=True); import time; time.sleep(30)"],
                             stdout=subprocess.PIPE, text=True, env={**run_env(), "TMPDIR": str(tmp_path)})
    try:
        first = int(other.stdout.readline())
        assert 1 <= first <= cores
        assert share_of_cores() == max(1, cores // 2)  # this process and the other one
        assert not os.path.exists(ghost)
    finally:
        other.kill()
        other.wait()
    deadline = time.time() + 10
    while share_of_cores() != cores and time.time() < deadline:  # the other one is gone: every core again
        time.sleep(0.2)
    assert share_of_cores() == cores
    os.remove(os.path.join(_registry(), str(os.getpid())))  # the test runner asks for no share of its own


def test_a_slowdown_on_a_busy_machine_is_said_once_and_not_on_an_idle_one():
    said = []
    watch = Slowdown()
    steps = [10.0, 11.0, 10.5, 12.0, 40.0, 45.0]
    for i, t in enumerate(steps, 1):
        watch.check({"step": i, "time/step": t}, said.append, load=lambda: 9.0)
    assert len(said) == 1 and said[0].startswith("NOTE step 5: a round took 3.8x the first rounds' median (40.0 s "
                                                 "against 10.5 s); the machine's load average is 9.0 on ")
    quiet = []
    watch = Slowdown()
    for i, t in enumerate(steps, 1):
        watch.check({"step": i, "time/step": t}, quiet.append, load=lambda: 0.5)  # slower, but nobody else is
    assert quiet == []
