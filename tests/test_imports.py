"""Our light packages stay light, and each name resolves to this repository (not the
unrelated `verifiers`, `sandboxes` or `curricula` packages on PyPI)."""
import json
import subprocess

from .conftest import PY, ROOT, run_env

PROBE = """
import json, sys
import verifiers, sandboxes, curricula, reasoning_rl, reasoning_rl.types, reasoning_rl.config
print(json.dumps({"torch": "torch" in sys.modules, "transformers": "transformers" in sys.modules,
                  "files": {m.__name__: m.__file__ for m in (verifiers, sandboxes, curricula, reasoning_rl)}}))
"""


def test_light_packages_do_not_import_torch_and_resolve_here():
    r = subprocess.run([PY, "-c", PROBE], capture_output=True, text=True, env=run_env(), timeout=120, cwd="/")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["torch"] is False, "importing verifiers/sandboxes/curricula pulled in torch"
    assert out["transformers"] is False
    for name, path in out["files"].items():
        assert path.startswith(str(ROOT / name)), f"{name} resolves to {path}, not this repository"


def test_verifiers_list_runs_without_torch():
    probe = "import sys; from reasoning_rl.cli import main; main(['verifiers', 'list']); assert 'torch' not in sys.modules"
    r = subprocess.run([PY, "-c", probe], capture_output=True, text=True, env=run_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "exact" in r.stdout
