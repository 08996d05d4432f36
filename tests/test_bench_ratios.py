"""The benches against TRL call a time ratio a speed-up only where both sides did the same work: the same rows
through the update, and generated tokens within a tolerance."""
import importlib.util

from .conftest import ROOT


def _bench(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_ratio_is_a_speed_up_only_at_equal_work():
    equal_work = _bench("grpo_vs_trl").equal_work
    trl = {"rows": [32] * 4, "tokens": [1000.0] * 4}
    ok, line = equal_work({"rows": [32] * 4, "tokens": [1050.0] * 4}, trl)
    assert ok and line.endswith("equal work") and "NOT" not in line
    # rows of zero advantage left out: our update did a quarter of TRL's (the 9.70x of issue 70)
    ok, line = equal_work({"rows": [8] * 4, "tokens": [1000.0] * 4}, trl)
    assert not ok and "NOT equal work" in line and "ran 24 of TRL's 96 rows" in line
    ok, line = equal_work({"rows": [32] * 4, "tokens": [600.0] * 4}, trl)  # far shorter completions: less work
    assert not ok and "generated tokens differ" in line
