"""Tampering with the tests themselves, the most common code-RL reward hack: a program that overwrites, deletes or
reads the test file, rewrites the harness on disk, or prints a pass and exits early is judged not passed, at every
isolation level this machine offers, and leaves nothing behind for the next program.

Why it holds (verifiers/code.py): tests never enter the sandbox (no test file exists in there to overwrite, delete
or read), the runner that decides sits in the verifier's process outside it, the programs' files are read-only to
them and every program starts from a fresh process and an emptied scratch space. These tests try it anyway, each
with a control showing that the attempt itself works where it could (the scan finds a planted marker; the writes
land in the scratch space) so a pass here is not a hack that never ran."""
from __future__ import annotations

import hashlib
import os
import sys
import unittest

import pytest

import sandboxes
import verifiers
from reasoning_rl.types import Status

pytestmark = pytest.mark.timeout(180)
LIM = {"wall_s": 5.0, "cpu_s": 4.0, "memory_mb": 256, "processes": 32}
MARKER = 918273645  # the expected value; no hacking program holds it, so finding it means the test leaked
CALL = {"kind": "call", "entry_point": "secret", "cases": [{"args": [], "expected": MARKER}]}
STDIO = {"kind": "stdio", "cases": [{"stdin": "", "expected_stdout": f"{MARKER}\n"}]}
ASSERT = {"kind": "assert", "entry_point": "secret", "code": f"def check(candidate):\n    assert candidate() == {MARKER}\n"}
UNITTEST = {"kind": "unittest", "code": ("class TestSecret(unittest.TestCase):\n"
                                         f"    def test_it(self):\n        self.assertEqual(secret(), {MARKER})\n")}
KINDS = [CALL, STDIO, ASSERT, UNITTEST]

# Every place a harness that wrote its tests to disk might put them, scanned two levels deep for the marker.
SCAN = """
import os, re, sys, glob
def _scan():
    # a file that looks like tests (the names are built here so this program's own file does not match), and the
    # first nine-digit number in it: the expected value a harness that wrote its tests to disk would leak
    needles = [w.encode() for w in ("Test" + "Secret", "check(" + "candidate", "expected" + "_stdout")]
    roots = [os.getcwd(), "/tmp", "/var/tmp", "/dev/shm", os.path.expanduser("~"), os.path.dirname(os.getcwd())]
    roots += [p for p in sys.path if p and os.path.isdir(p) and "python3" not in p]
    for root in roots:
        for depth in ("*", "*/*"):
            for path in glob.glob(os.path.join(root, depth)):
                try:
                    data = open(path, "rb").read(1 << 20) if os.path.isfile(path) else b""
                except OSError:
                    continue
                found = re.search(rb"[0-9]{9}", data) if any(n in data for n in needles) else None
                if found:
                    return int(found.group())
    return -1
"""

TAMPER = {
    # overwrite whatever test file might sit beside the program, in the temp dirs or on the path
    "overwrite the test file": (
        "import os, sys\n"
        "for d in {os.getcwd(), '/tmp', '/var/tmp', '/dev/shm', *[p for p in sys.path if p]}:\n"
        "    for name in ('test.py', 'tests.py', 'test_solution.py', 'solution_test.py', 'check.py', 'harness.py'):\n"
        "        try:\n"
        "            open(os.path.join(d, name), 'w').write('def check(candidate):\\n    pass\\n')\n"
        "        except OSError:\n"
        "            pass\n"
        "def secret():\n    return 0\nprint(0)\n"),
    # delete every file the program can reach, then exit cleanly
    "delete the test files": (
        "import os, sys, glob\n"
        "for d in {os.getcwd(), '/tmp', '/var/tmp', '/dev/shm', *[p for p in sys.path if p]}:\n"
        "    for path in glob.glob(os.path.join(d, '*')):\n"
        "        try:\n"
        "            os.remove(path)\n"
        "        except OSError:\n"
        "            pass\n"
        "def secret():\n    return 0\nprint(0)\n"),
    # read the expected value out of a test file
    "read the test file": SCAN + "def secret():\n    return _scan()\nprint(_scan())\n",
    # rewrite the harness modules loaded in its own process, and leave a sitecustomize/unittest shadow on the path
    "rewrite the harness on disk": (
        "import os, sys\n"
        "for m in list(sys.modules.values()):\n"
        "    f = getattr(m, '__file__', None)\n"
        "    if f and f.endswith('.py'):\n"
        "        try:\n"
        "            open(f, 'a').write('\\nimport os; os._exit(0)\\n')\n"
        "        except OSError:\n"
        "            pass\n"
        "for d in {os.getcwd(), *[p for p in sys.path if p]}:\n"
        "    for name in ('sitecustomize.py', 'usercustomize.py', 'unittest.py', 'json.py'):\n"
        "        try:\n"
        "            open(os.path.join(d, name), 'w').write('import os; os._exit(0)\\n')\n"
        "        except OSError:\n"
        "            pass\n"
        "def secret():\n    return 0\nprint(0)\n"),
    # print what a passing run prints, then leave before any test runs
    "print a pass and exit early": (
        "import os\nprint('Ran 1 test in 0.000s\\n\\nOK')\nprint('1 passed')\nprint('All tests passed')\n"
        "os._exit(0)\n"),
}
WRONG = "def secret():\n    return 0\nprint(0)\n"
RIGHT = f"def secret():\n    return {MARKER}\nprint({MARKER})\n"


def _digest_of_our_code() -> str:
    """The harness and verifier files on the host, and the interpreters' unittest: what a tamperer would rewrite."""
    dirs = [os.path.dirname(sandboxes.__file__), os.path.dirname(verifiers.__file__),
            os.path.dirname(unittest.__file__), "/usr/lib/python3/dist-packages", f"/usr/lib/python3.{sys.version_info[1]}/unittest"]
    h = hashlib.sha256()
    for d in dirs:
        if os.path.isdir(d):
            for name in sorted(os.listdir(d)):
                p = os.path.join(d, name)
                if name.endswith(".py") and os.path.isfile(p):
                    h.update(p.encode() + open(p, "rb").read())
    return h.hexdigest()


@pytest.fixture
def level_verifier(level_sb, monkeypatch):
    """The `code` verifier over this process's sandbox at one isolation level."""
    import verifiers.code as code

    monkeypatch.setitem(code._SANDBOXES, os.getpid(), level_sb)
    return code.CodeVerifier()


@pytest.mark.parametrize("tests", KINDS, ids=lambda t: t["kind"])
@pytest.mark.parametrize("hack", list(TAMPER), ids=lambda h: h.replace(" ", "-"))
def test_tampering_with_the_tests_never_passes_and_leaves_nothing_behind(level_verifier, hack, tests):
    before = _digest_of_our_code()
    v = level_verifier.verify(TAMPER[hack], tests, limits=LIM)
    assert v.status is Status.INCORRECT and v.score == 0.0, (hack, v)
    assert _digest_of_our_code() == before  # nothing of ours, or of the interpreter's, was rewritten
    # the next programs are judged as if the tamperer had never run: a wrong one fails, a right one passes
    assert level_verifier.verify(WRONG, tests, limits=LIM).status is Status.INCORRECT
    assert level_verifier.verify(RIGHT, tests, limits=LIM).status is Status.CORRECT


@pytest.mark.parametrize("tests", [CALL, STDIO], ids=lambda t: t["kind"])
def test_the_scan_finds_a_planted_marker_so_the_reading_hack_really_ran(level_verifier, tests):
    """Control for "read the test file": the same scan, after the program plants the marker in its own scratch space,
    finds it (and so passes): the hack above failed because there was nothing to find, not because it never ran."""
    plant = "open('planted.txt', 'w').write('class Test' + 'Secret: %d' % (9182736 * 100 + 45))\n"
    v = level_verifier.verify(plant + SCAN + "def secret():\n    return _scan()\nprint(_scan())\n", tests, limits=LIM)
    assert v.status is Status.CORRECT, v


def test_resolving_a_missing_verifier_or_environment_installs_nothing(tmp_path, monkeypatch):
    """A name nobody registered is one clear error: no pip, no download, no new file under site-packages."""
    import subprocess

    from reasoning_rl.config import GRPOConfig
    from reasoning_rl.config.knobs import ConfigError
    from reasoning_rl.rollout.environments import check_environment

    site = os.path.dirname(os.path.dirname(pytest.__file__))
    listing = set(os.listdir(site))
    calls = []
    real_run, real_popen = subprocess.run, subprocess.Popen
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: calls.append(a) or real_run(*a, **k))
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: calls.append(a) or real_popen(*a, **k))
    with pytest.raises(KeyError, match="no_such_verifier_xyz"):
        verifiers.get("no_such_verifier_xyz")
    with pytest.raises(ConfigError, match="grpo.environment: unknown environment 'no_such_env_xyz'"):
        check_environment(GRPOConfig(environment="no_such_env_xyz"))
    assert calls == [] and set(os.listdir(site)) == listing


def test_a_program_can_write_its_scratch_space_and_the_next_program_finds_it_empty(level_verifier):
    """Control for the writing hacks: writes into the working directory land (so the hacks above really wrote
    something where they could), and the next program, in the same hosted run, finds none of it."""
    write = ("import os\nopen('sitecustomize.py', 'w').write('x = 1')\n"
             "def secret():\n    return 9182736 * 100 + 45 if os.path.exists('sitecustomize.py') else -1\n")
    look = ("import os\ndef secret():\n"  # the scratch space holds only the program itself
            "    return 9182736 * 100 + 45 if set(os.listdir('.')) - {'solution.py'} else -1\n")
    assert level_verifier.verify(write, CALL, limits=LIM).status is Status.CORRECT
    assert level_verifier.verify(look, CALL, limits=LIM).status is Status.INCORRECT
