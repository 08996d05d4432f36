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


PACKAGES = ("reasoning_rl", "verifiers", "sandboxes", "curricula")


def _internal_imports() -> dict[str, set[str]]:
    """module -> the project modules it imports, at module top or inside a function (a function-local import
    only hides a cycle, it does not remove it)."""
    import ast

    mods = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    prefix = ".".join(base + ([node.module] if node.module else []))
                else:
                    prefix = node.module or ""
                targets = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in mods else prefix for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[mod].update(t for t in targets if t in mods and t != mod)
    return graph


def test_no_import_cycle_among_the_projects_modules():
    graph = _internal_imports()
    assert len(graph) > 50
    cycles, state = [], {}

    def visit(m, path):  # depth-first search; a grey node reached again closes a cycle
        state[m] = "grey"
        for n in sorted(graph[m]):
            if state.get(n) == "grey":
                cycles.append(path[path.index(n):] + [n])
            elif n not in state:
                visit(n, path + [n])
        state[m] = "black"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_cycle_check_sees_function_local_imports(tmp_path, monkeypatch):
    """The checker itself: a cycle closed only by an import inside a function is still a cycle."""
    for name, text in (("a.py", "from . import b\n"), ("b.py", "def f():\n    from . import a\n"), ("__init__.py", "")):
        (tmp_path / "curricula").mkdir(exist_ok=True)
        (tmp_path / "curricula" / name).write_text(text)
    monkeypatch.setattr(__import__("tests.test_imports", fromlist=["ROOT"]), "ROOT", tmp_path)
    graph = _internal_imports()
    assert "curricula.a" in graph["curricula.b"] and "curricula.b" in graph["curricula.a"]


# The layers, lowest first (docs/architecture.md, "Layers"): a module imports from its own layer or a lower one.
#   0  reasoning_rl.types, .registry, .errors (and the package's light __init__): the types at the seams
#   1  sandboxes
#   2  verifiers, curricula
#   3  the rest of reasoning_rl: tasks, models, engines, trainers, the CLI
BOTTOM = ("reasoning_rl", "reasoning_rl.types", "reasoning_rl.registry", "reasoning_rl.errors")
LAYER_OF_PACKAGE = {"sandboxes": 1, "verifiers": 2, "curricula": 2, "reasoning_rl": 3}


def _layer(module: str) -> int:
    return 0 if module in BOTTOM else LAYER_OF_PACKAGE[module.split(".")[0]]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} -> {t}" for m, ts in graph.items() for t in ts if _layer(t) > _layer(m))


def test_no_module_imports_from_a_layer_above_its_own():
    graph = _internal_imports()
    assert _layer("verifiers.code") == _layer("curricula.ledger") == 2 and _layer("reasoning_rl.trainers.loop") == 3
    assert _layer("reasoning_rl.types") == 0 and _layer("sandboxes.plain") == 1
    assert upward_imports(graph) == []


def test_the_layer_check_sees_an_upward_import():
    graph = _internal_imports()
    graph["verifiers.judge"] = graph["verifiers.judge"] | {"reasoning_rl.models"}  # a verifier reaching into torch code
    graph["reasoning_rl.types"] = graph["reasoning_rl.types"] | {"curricula.ledger"}
    assert upward_imports(graph) == ["reasoning_rl.types -> curricula.ledger", "verifiers.judge -> reasoning_rl.models"]
