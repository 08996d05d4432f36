"""Our light packages stay light, and each name resolves to this repository (not the
unrelated `verifiers`, `sandboxes` or `curricula` packages on PyPI)."""
import json
import subprocess

import pytest

from .conftest import PY, ROOT, run_env

PROBE = """
import json, sys
import verifiers, sandboxes, curricula, reasoning_rl, reasoning_rl.types, reasoning_rl.config, reasoning_rl.environments
print(json.dumps({"torch": "torch" in sys.modules, "transformers": "transformers" in sys.modules,
                  "files": {m.__name__: m.__file__ for m in (verifiers, sandboxes, curricula, reasoning_rl)}}))
"""


def test_light_packages_do_not_import_torch_and_resolve_here():
    """The light packages, the config and the names a plugin environment imports (reasoning_rl.environments)."""
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


# The rows, lowest first: docs/architecture.md's table "Layers: one row per folder" is the specification. A module
# imports from its own row or a lower one; each row is a folder (or a few top-level modules) of the project.
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def layer_table(text: str | None = None) -> list[tuple[int, tuple[str, ...], str]]:
    """(row, module prefixes, may-import cell) of each line of the architecture page's table."""
    import re

    text = ARCHITECTURE.read_text() if text is None else text
    body = text.split("## Layers: one row per folder", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].isdigit():
            continue
        paths = re.findall(r"`([^`]+)`", cells[1])
        prefixes = tuple(p.removesuffix("/").removesuffix(".py").replace("/", ".").removesuffix(".__init__")
                         for p in paths)
        rows.append((int(cells[0]), prefixes, cells[3]))
    return rows


def layer_of(module: str, table) -> int:
    """The row of the longest prefix that names `module`; KeyError for a module no row names."""
    best, row = "", None
    for n, prefixes, _ in table:
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > len(best):
                best, row = p, n
    if row is None:
        raise KeyError(module)
    return row


def upward_imports(graph: dict[str, set[str]], table=None) -> list[str]:
    table = layer_table() if table is None else table
    return sorted(f"{m} -> {t}" for m, ts in graph.items() for t in ts if layer_of(t, table) > layer_of(m, table))


def test_the_table_is_one_row_per_folder_in_order_and_says_what_each_may_import():
    table = layer_table()
    assert [n for n, _, _ in table] == list(range(len(table))) and len(table) >= 10
    for n, prefixes, may in table:
        assert prefixes, f"row {n} names no folder"
        want = "the standard library" if n == 0 else "row 0" if n == 1 else f"rows 0-{n - 1}"
        assert may.startswith(want), f"row {n}: 'may import' says {may!r}, the checked rule is {want!r}"


def test_every_module_belongs_to_a_row():
    table = layer_table()
    missing = []
    for m in _internal_imports():
        try:
            layer_of(m, table)
        except KeyError:
            missing.append(m)
    assert missing == [], f"modules no row of docs/architecture.md names: {missing}"


def test_every_folder_of_the_package_has_a_row():
    table = layer_table()
    named = {p for _, prefixes, _ in table for p in prefixes}
    folders = {f"reasoning_rl.{d.name}" for d in (ROOT / "reasoning_rl").iterdir()
               if d.is_dir() and (d / "__init__.py").exists()}
    assert folders <= named, f"folders without a row of their own: {sorted(folders - named)}"


def test_no_module_imports_from_a_row_below_its_own():
    table = layer_table()
    graph = _internal_imports()
    assert layer_of("verifiers.code", table) == layer_of("curricula.ledger", table) == 2
    assert layer_of("reasoning_rl.types", table) == 0 and layer_of("sandboxes.plain", table) == 1
    assert layer_of("reasoning_rl.config.knobs", table) < layer_of("reasoning_rl.models.load", table) \
        < layer_of("reasoning_rl.rollout.hf", table) < layer_of("reasoning_rl.trainers.loop", table) \
        < layer_of("reasoning_rl.cli.commands", table)
    assert upward_imports(graph, table) == []


def test_the_layer_check_sees_an_upward_import():
    graph = _internal_imports()
    graph["verifiers.judge"] = graph["verifiers.judge"] | {"reasoning_rl.models.load"}  # a verifier reaching into torch
    graph["reasoning_rl.types"] = graph["reasoning_rl.types"] | {"curricula.ledger"}
    graph["reasoning_rl.models.logprobs"] = graph["reasoning_rl.models.logprobs"] | {"reasoning_rl.rollout.decode"}
    graph["reasoning_rl.config.rl"] = graph["reasoning_rl.config.rl"] | {"reasoning_rl.rollout.environments"}
    assert upward_imports(graph) == ["reasoning_rl.config.rl -> reasoning_rl.rollout.environments",
                                     "reasoning_rl.models.logprobs -> reasoning_rl.rollout.decode",
                                     "reasoning_rl.types -> curricula.ledger",
                                     "verifiers.judge -> reasoning_rl.models.load"]


def test_the_table_reader_sees_a_module_without_a_row():
    table = layer_table("## Layers: one row per folder\n| 0 | `reasoning_rl/types.py` | x | the standard library |\n")
    assert layer_of("reasoning_rl.types", table) == 0
    with pytest.raises(KeyError):
        layer_of("reasoning_rl.newfolder.thing", table)
