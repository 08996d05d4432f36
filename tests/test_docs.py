"""The documentation generated from code is up to date."""
from tests.conftest import ROOT


def test_metrics_reference_is_generated_from_the_code():
    from reasoning_rl.metric_docs import METRICS, render_markdown

    assert len({m.name for m in METRICS}) == len(METRICS)  # no metric listed twice
    assert (ROOT / "docs" / "metrics.md").read_text() == render_markdown(), \
        "docs/metrics.md is stale: python -m reasoning_rl.metric_docs > docs/metrics.md"
