"""The documentation generated from code is up to date."""
from tests.conftest import ROOT


def test_metrics_reference_is_generated_from_the_code():
    from reasoning_rl.trainers.metric_docs import METRICS, render_markdown

    assert len({m.name for m in METRICS}) == len(METRICS)  # no metric listed twice
    assert (ROOT / "docs" / "metrics.md").read_text() == render_markdown(), \
        "docs/metrics.md is stale: python -m reasoning_rl.trainers.metric_docs > docs/metrics.md"


def _project_files():
    skip = {".venv", ".venv-vllm", ".git", "runs", "build", "dist", ".hypothesis", ".pytest_cache"}
    for path in ROOT.rglob("*"):
        if path.is_file() and path.suffix in (".py", ".md", ".yaml", ".toml", ".cfg", ".txt") \
                and not skip & set(path.relative_to(ROOT).parts):
            yield path


def test_every_algorithms_citation_names_a_section_that_exists():
    import re

    doc = (ROOT / "docs" / "algorithms.md").read_text()
    sections = set(re.findall(r"^## §([a-z][\w-]*)", doc, re.M))
    assert {"grpo-advantages", "ppo-clip", "gae", "kl", "dpo", "process", "curriculum"} <= sections
    # every § in the project, on any line, names one of those sections: never a bare section number, which no reader can
    # follow once sections move, and never a section of a document that is not here
    cited, missing = 0, []
    for path in _project_files():
        if path.name in ("algorithms.md", "test_docs.py"):
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for name in (m.rstrip(".-") for m in re.findall(r"§ ?([\w.-]*)", line)):
                cited += 1
                if name not in sections:
                    missing.append(f"{path.relative_to(ROOT)}:{n}: §{name}")
    assert missing == [] and cited >= 15


def test_nothing_cites_a_document_outside_the_repository():
    outside = ("ALGORITHMS" + ".md", "DESIGN" + ".md", "../" + "shared/ALGORITHMS", "../" + "shared/DESIGN")
    hits = [f"{p.relative_to(ROOT)}:{n}" for p in _project_files()
            for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1) if any(o in line for o in outside)]
    # the project's code names no file beside the checkout either (the README may tell a developer where the
    # shared labelled data lies; code a user runs from a clone cannot depend on it)
    code = [p for p in _project_files() if p.suffix == ".py" and p.relative_to(ROOT).parts[0] not in ("tests", "bench")]
    hits += [f"{p.relative_to(ROOT)}:{n}" for p in code
             for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1) if "../" + "shared" in line]
    assert hits == []


def _anchors(md: str) -> set[str]:
    """The anchors a Markdown file's headings get (GitHub's rule: lower case, punctuation dropped, spaces to -)."""
    import re

    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", md, re.M)}


def test_the_readme_is_a_first_page_and_every_link_in_the_docs_resolves():
    import re

    readme = ROOT / "README.md"
    assert len(readme.read_text().splitlines()) <= 200
    pages = [readme, *sorted((ROOT / "docs").glob("*.md"))]
    checked, broken = 0, []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            checked += 1
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest.read_text()):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == [] and checked >= 20
