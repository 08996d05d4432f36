"""The trainers stay readable: no function in `reasoning_rl/trainers/` longer than about 80 lines.

A loop that grows back into one long function (set-up, rounds, metrics, checkpoints and logging
in one body) fails here; split it into the loop's named steps instead (`trainers/loop.py`).
"""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
LIMIT = 80


def long_functions(path: pathlib.Path, limit: int = LIMIT) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [f"{path.name}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)" for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > limit]


def test_no_trainer_function_is_longer_than_80_lines():
    found = [x for f in sorted((ROOT / "reasoning_rl" / "trainers").glob("*.py")) for x in long_functions(f)]
    assert found == []


def test_the_length_check_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT + 1))
    (tmp_path / "long.py").write_text(f"def f():\n{body}\n")
    assert long_functions(tmp_path / "long.py") == [f"long.py:1 f ({LIMIT + 2} lines)"]
