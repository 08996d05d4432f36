"""The package stays readable: no function in `reasoning_rl/` longer than about 80 lines, and the loop's
"file by file" list of one step names functions that exist and call each other in the order it says.

A loop that grows back into one long function (set-up, rounds, metrics, checkpoints and logging
in one body) fails here; split it into the loop's named steps instead (`trainers/loop.py`), as the episode
runner's turn (`rollout/episodes.py`) and the parser's commands (`cli/commands.py`) are split.
"""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
LIMIT = 80


def long_functions(path: pathlib.Path, limit: int = LIMIT) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [f"{path.name}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)" for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > limit]


def test_no_function_of_the_package_is_longer_than_80_lines():
    files = sorted((ROOT / "reasoning_rl").rglob("*.py"))
    assert len(files) > 60  # the whole package, every folder
    found = [x for f in files for x in long_functions(f)]
    assert found == []


def test_the_length_check_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT + 1))
    (tmp_path / "long.py").write_text(f"def f():\n{body}\n")
    assert long_functions(tmp_path / "long.py") == [f"long.py:1 f ({LIMIT + 2} lines)"]


def _step_lines() -> list[tuple[str, list[str]]]:
    """(file, [names in call order]) of the loop docstring's "file by file" list."""
    from reasoning_rl.trainers import loop

    doc = loop.__doc__.split("file by file", 1)[1].split("\n\n", 1)[0]
    rows = []
    for line in doc.splitlines()[1:]:
        path, names = line.split(None, 1)
        names = names.split("  ", 1)[0].strip()  # the comment follows two or more spaces
        rows.append((path, [n.strip() for n in names.split("->")]))
    return rows


def _module_of(path: str):
    import importlib

    dotted = path.removesuffix(".py").replace("/", ".")
    return importlib.import_module(dotted if dotted.startswith("curricula.") else f"reasoning_rl.{dotted}")


def test_the_loops_file_by_file_list_names_code_that_exists_and_calls_in_that_order():
    import inspect

    rows = _step_lines()
    assert len(rows) >= 10  # the list was found, not an empty block
    for path, names in rows:
        module = _module_of(path)
        objs = []
        for name in names:
            obj = module
            for part in name.split("."):
                assert hasattr(obj, part), f"{path}: {name} does not exist"
                obj = getattr(obj, part)
            objs.append(obj)
        for (caller, name) in zip(objs, names[1:]):  # `a -> b`: a's body calls b
            assert f"{name.split('.')[-1]}(" in inspect.getsource(caller), f"{path}: {caller.__name__} does not call {name}"


def test_the_file_by_file_check_sees_a_name_that_does_not_exist(monkeypatch):
    from reasoning_rl.trainers import loop

    monkeypatch.setattr(loop, "__doc__", loop.__doc__.replace("_make_round", "_make_the_round"))
    with pytest.raises(AssertionError, match="_make_the_round does not exist"):
        test_the_loops_file_by_file_list_names_code_that_exists_and_calls_in_that_order()


def test_every_bench_says_where_it_ran():
    """Figures from two machines can be set side by side only if each says which machine: every bench prints
    bench/machine.describe() (processor, flags, cores, torch, oneDNN, threads) before its figures."""
    import glob
    import re

    root = pathlib.Path(__file__).resolve().parents[1]
    benches = [p for p in sorted(glob.glob(str(root / "bench" / "*.py"))) if not p.endswith("machine.py")]
    silent = [p for p in benches if not re.search(r"print\(describe\(\)", open(p).read())]
    assert len(benches) > 20 and silent == [], silent
