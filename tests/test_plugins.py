"""Plugin discovery through a real entry point: the example plugin (a verifier and an environment, written against
the documented names `verifiers` and `reasoning_rl.environments`) and a deliberately broken one are pip-installed into
a temporary directory and found by a fresh process: listed, used as a reward term, named as a run's environment."""
import json
import shutil
import subprocess
import sys

import pytest

from .conftest import PY, ROOT, run_env


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plugins")
    srcs = []
    for src in (ROOT / "examples/plugins/rrl-example-plugin", ROOT / "tests/fixtures/rrl-broken-plugin"):
        dst = tmp / "src" / src.name
        shutil.copytree(src, dst)
        srcs.append(str(dst))
    site = tmp / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--no-index", "--target", str(site), *srcs], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return site


def _list(site, *extra):
    env = run_env()
    env["PYTHONPATH"] = f"{site}:{env['PYTHONPATH']}"
    return subprocess.run([PY, "-m", "reasoning_rl", "verifiers", "list", *extra],
                          capture_output=True, text=True, env=env, timeout=120)


def test_installed_plugin_is_listed_with_its_distribution(plugin_site):
    r = _list(plugin_site, "--json")
    assert r.returncode == 0, r.stderr
    rows = {row["name"]: row for row in json.loads(r.stdout)}
    assert rows["keywords"]["distribution"] == "rrl-example-plugin"
    assert rows["keywords"]["version"] == "0.1.0"
    assert rows["keywords"]["needs"] == ["reference"]
    assert rows["exact"]["distribution"] == "reasoning-rl"  # the built-ins still load
    assert "backwards" not in rows


def test_broken_plugin_gives_one_clear_error_line(plugin_site):
    r = _list(plugin_site)
    assert r.returncode == 0
    errors = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(errors) == 1, r.stderr
    assert "rrl-broken-plugin" in errors[0] and "output_range" in errors[0] and "(1.0, 0.0)" in errors[0]
    assert "keywords" in r.stdout and "rrl-example-plugin" in r.stdout


def test_plugin_verifier_works_in_the_fresh_process(plugin_site):
    probe = ("import verifiers; v = verifiers.get('keywords'); "
             "print(v.verify('the cat sat', ['cat', 'dog']).score, v.verify('cat dog', ['cat', 'dog']).status.value)")
    env = run_env()
    env["PYTHONPATH"] = f"{plugin_site}:{env['PYTHONPATH']}"
    r = subprocess.run([PY, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0.5", "correct"]


def test_a_duck_typed_verifier_is_asked_for_the_prompt_by_its_spec_alone():
    """A plugin that does not subclass Verifier has no `reads_prompt`: whether it gets the prompt is its spec's."""
    from verifiers.base import VerifierSpec, wants_prompt

    class Duck:
        name, version = "duck", "1"

        def __init__(self, needs):
            self.spec = VerifierSpec(needs=needs, output_range=(0.0, 1.0))

    assert wants_prompt(Duck(("reference", "prompt"))) and not wants_prompt(Duck(("reference",)))


def _fresh(site, code: str):
    env = run_env()
    env["PYTHONPATH"] = f"{site}:{env['PYTHONPATH']}"
    return subprocess.run([PY, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_a_plugin_verifier_is_a_reward_term_and_a_plugin_environment_a_runs_environment(plugin_site):
    """The installed distribution, unchanged: its verifier scores as a term of a composed reward, and its environment
    is resolved by the name a config gives (the check a command makes before loading anything), then answers a
    call."""
    code = """
import verifiers
from reasoning_rl import config
from reasoning_rl.config import Config
from reasoning_rl.environments import ENVIRONMENTS
from reasoning_rl.rollout.environments import check_environment

reward = verifiers.Reward((verifiers.Term("keywords", 1.0), verifiers.Term("exact", 0.5)), outcome="keywords")
v = reward.verify(["a cat and a dog"], [["cat", "dog"]], term_references={"keywords": [["cat", "dog"]],
                                                                            "exact": ["no"]})[0]
print(v["keywords"].status.value, reward.combine(v))
cfg = config.load(Config, overrides=["grpo.environment=lookup"])
check_environment(cfg.grpo)
env = ENVIRONMENTS.get("lookup")()
state = env.start({"facts": {"pi": "3.14"}})
print(ENVIRONMENTS.source("lookup"), repr(env.respond([state], ["so [[pi]]"])[0].observation))
"""
    r = _fresh(plugin_site, code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["correct 1.0", "rrl-example-plugin ' = 3.14\\n'"]


def test_a_missing_environment_name_installs_nothing_and_says_so_in_one_line(plugin_site, tmp_path):
    """Resolving a name never installs or downloads: an unknown environment is one line listing the valid ones."""
    env = run_env()
    env["PYTHONPATH"] = f"{plugin_site}:{env['PYTHONPATH']}"
    r = subprocess.run([PY, "-m", "reasoning_rl", "config", "--set", "grpo.environment=lookups"],
                       capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "reasoning-rl config: error: grpo.environment: unknown environment 'lookups'; valid: calculator, lookup, python"]
    assert list(tmp_path.iterdir()) == []  # nothing written where it ran
