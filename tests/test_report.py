"""`reasoning-rl report`: the page's data is the run's own, damaged runs are shown with what was skipped, and the
page works in a real headless browser (Debian's chromium, driven by Selenium; no browser is downloaded).

The run is a real GRPO run of the tiny model (random weights, a few rounds), re-verified with `repetition` standing in
for the outcome (it passes any text that does not repeat itself), so that the re-verification page has flips.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request

import pytest

import verifiers
from reasoning_rl import config
from reasoning_rl.config.sections import Config
from reasoning_rl.errors import UserError
from reasoning_rl.cli.report import SAMPLE_COLUMNS, build_report, render, write_report

from .conftest import PY, ROOT, run_env

RUN = ["model.sft_warm_start=false", "model.tiny.num_layers=1", "grpo.steps=3", "grpo.prompts_per_step=4",
       "grpo.group_size=4", "grpo.filter_mixed=false", "eval.size=8", "grpo.eval_every=1", "grpo.train_prompts=16",
       "generation.max_tokens=8", "grpo.verifier_workers=1", "grpo.checkpoint_every=0"]
COL = {c: i for i, c in enumerate(SAMPLE_COLUMNS)}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from reasoning_rl.cli.reverify import reverify, write_report as write_reverify
    from reasoning_rl.trainers.grpo import train_grpo

    out = tmp_path_factory.mktemp("report") / "run"
    train_grpo(config.load(Config, overrides=RUN + [f"output_dir={out}"]), log=lambda *_: None)
    write_reverify(reverify(str(out), "repetition"), str(out / "reverify"))
    return out


def _lines(path):
    return [json.loads(x) for x in open(path, encoding="utf-8") if x.strip()]


def test_the_page_holds_the_runs_own_numbers_and_samples(run_dir):
    rep = build_report(str(run_dir))
    assert rep.metrics == _lines(run_dir / "metrics.jsonl")
    archive = _lines(run_dir / "archive.jsonl")
    assert len(rep.samples) == len(archive) == 3 * 4 * 4
    for row, line in zip(rep.samples, archive):
        assert row[COL["text"]] == line["text"] and row[COL["step"]] == line["step"]
        assert row[COL["status"]] == line["verdicts"]["math"]["status"]
    assert rep.run["kind"] == "grpo" and rep.run["config"]["grpo"]["steps"] == 3
    assert rep.run["verifiers"]["math"]["version"] == verifiers.get("math").version
    assert rep.flips and {f["verifier"] for f in rep.flips} == {"repetition"}
    assert rep.skipped == []


def test_the_highlight_is_the_answer_the_verifier_read():
    """On an archive line written here: the math verifier reads the boxed 12, not the 7 after it."""
    from reasoning_rl.cli.report import _highlight

    text = "3+4=7, so \\boxed{12} and not 7"
    start, end = _highlight("math", text)
    assert text[start:end] == "12" and text[start - 7:start] == "\\boxed{"
    assert _highlight("math", "no number here") is None
    assert _highlight("contains_answer", "12") is None  # a verifier with no answer_key: nothing to highlight


def test_a_damaged_run_says_what_it_skipped_and_shows_the_rest(run_dir, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(run_dir, broken)
    with open(broken / "metrics.jsonl", "a") as f:
        f.write('{"step": 4, "reward/me')  # a run killed mid-write
    os.remove(broken / "archive.jsonl")
    rep = write_report(str(broken))
    assert any("metrics.jsonl:" in s and "not a complete JSON line" in s for s in rep.skipped)
    assert any("archive.jsonl: missing" in s for s in rep.skipped)
    assert len(rep.metrics) == len(_lines(run_dir / "metrics.jsonl")) and rep.samples == []
    assert (broken / "report.html").stat().st_size > 10_000
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserError, match="neither metrics.jsonl nor archive.jsonl"):
        build_report(str(empty))


def test_the_prompts_page_has_the_ledger_and_each_groups_decision(run_dir):
    """The run's ledger as the page reads it: attempts are the archive's scored samples per prompt; with the mixed
    filter off every group was kept; the chances of the next draw sum to one over the prompts the sampler knows."""
    from curricula import Ledger

    cur = build_report(str(run_dir)).curriculum
    assert cur["sampler"] == "mixed_band" and cur["filter_mixed"] is False
    archive = _lines(run_dir / "archive.jsonl")
    with Ledger(run_dir / "ledger.sqlite") as led:
        entries = led.entries()
    assert set(cur["ledger"]) == set(entries) == {line["prompt_id"] for line in archive}
    for pid, e in entries.items():
        scored = [x["verdicts"]["math"]["score"] for x in archive if x["prompt_id"] == pid
                  and x["verdicts"]["math"]["score"] is not None]
        assert (cur["ledger"][pid]["attempts"], cur["ledger"][pid]["passes"]) == (e.attempts, e.passes) \
            == (len(scored), sum(v == 1.0 for v in scored))
    assert {d for steps in cur["groups"].values() for ds in steps.values() for d in ds} == {"kept"}
    # one decision per group drawn: four prompts a step, group size 4
    assert sum(len(ds) for steps in cur["groups"].values() for ds in steps.values()) == len(archive) // 4
    assert sum(e["p_draw"] for e in cur["ledger"].values()) == pytest.approx(1.0)


def test_the_curriculum_decisions_of_a_filtered_run_with_retirement(tmp_path):
    """Written here: three prompts' groups under the mixed filter and retirement after one all-pass group. Each
    group's decision is the filter's, the solved prompt is retired and never drawn, the rest share the draw."""
    from curricula import Ledger
    from reasoning_rl.cli.report import _curriculum
    from reasoning_rl.types import Group, Sample, Verdict

    outcomes = {"a": [True, False], "b": [False, False], "c": [True, True]}  # mixed, all fail, all pass
    with Ledger(tmp_path / "ledger.sqlite") as led:
        led.update([Group(pid, "", {}, [Sample("", verdicts={"math": Verdict.correct() if o else Verdict.incorrect()})
                                        for o in os]) for pid, os in outcomes.items()], "math", 1, retire_after=1)
    groups = {(1, pid): [[("correct", 1.0) if o else ("incorrect", 0.0) for o in os]] for pid, os in outcomes.items()}
    cfg = {"algorithm": "grpo", "config": {"grpo": {"sampler": "uniform", "filter_mixed": True, "retire_after": 1,
                                                    "group_size": 2}}}
    skipped = []
    cur = _curriculum(str(tmp_path), cfg, "math", groups, skipped)
    assert skipped == []
    assert {pid: steps[1] for pid, steps in cur["groups"].items()} == {
        "a": ["kept"], "b": ["dropped: all fail"], "c": ["dropped: all pass"]}
    assert cur["ledger"]["c"]["retired_at"] == 1 and cur["ledger"]["c"]["p_draw"] == 0.0
    assert cur["ledger"]["a"]["p_draw"] == cur["ledger"]["b"]["p_draw"] == 0.5
    (tmp_path / "ledger.sqlite").write_bytes(b"not a database at all" * 100)
    for suffix in ("-wal", "-shm"):
        if (tmp_path / f"ledger.sqlite{suffix}").exists():
            (tmp_path / f"ledger.sqlite{suffix}").unlink()
    cur = _curriculum(str(tmp_path), cfg, "math", groups, skipped)
    assert cur["ledger"] == {} and cur["groups"]["b"][1] == ["dropped: all fail"]
    assert len(skipped) == 1 and skipped[0].startswith("ledger.sqlite: not readable")


def test_an_eval_directory_is_a_report_too(tmp_path):
    """`reasoning-rl eval` writes an archive, task.json and summary.json, no metrics: its samples are the report."""
    from reasoning_rl.cli import main

    out = tmp_path / "eval"
    assert main(["eval", "--set", "model.sft_warm_start=false", "--set", "model.tiny.num_layers=1", "--set",
                 "generation.max_tokens=6", "--set", f"output_dir={out}", "--limit", "4", "-n", "2"]) == 0
    rep = write_report(str(out))
    assert rep.run["kind"] == "eval" and len(rep.samples) == 4 * 2 + 4  # sampled, and the greedy ones beside them
    assert rep.run["summary"]["prompts"] == 4 and any("metrics.jsonl: missing" in x for x in rep.skipped)


def test_a_ppo_run_is_a_report_too(tmp_path):
    """A PPO run (critic, GAE) writes what a GRPO run does: its metrics (with the critic's), archive, ledger and
    config; the report reads them as it reads GRPO's, curriculum included."""
    from reasoning_rl.trainers.ppo import train_ppo

    out = tmp_path / "ppo"
    ppo = [o.replace("grpo.", "ppo.") for o in RUN if "group_size" not in o and "filter_mixed" not in o]
    train_ppo(config.load(Config, overrides=ppo + ["ppo.steps=2", "ppo.group_size=2", f"output_dir={out}"]),
              log=lambda *_: None)
    rep = write_report(str(out))
    assert rep.run["kind"] == "ppo" and rep.skipped == []
    assert rep.metrics == _lines(out / "metrics.jsonl") and "loss/value" in rep.metrics[-1]
    assert len(rep.samples) == len(_lines(out / "archive.jsonl")) == 2 * 4 * 2
    decisions = [d for steps in rep.curriculum["groups"].values() for ds in steps.values() for d in ds]
    assert decisions == ["kept"] * (2 * 4) and set(rep.curriculum["ledger"]) == set(rep.curriculum["groups"])
    assert (out / "report.html").stat().st_size > 0


def test_a_sample_cannot_close_the_data_block(run_dir, tmp_path):
    """A completion that writes </script> stays data: the page still parses it as JSON."""
    rep = build_report(str(run_dir))
    rep.samples[0][COL["text"]] = "</script><script>alert(1)</script>"
    html = render(rep)
    block = html.split('<script id="data" type="application/json">', 1)[1].split("</script>", 1)[0]
    assert json.loads(block)["samples"][0][COL["text"]] == "</script><script>alert(1)</script>"


def test_cli_report_and_serve(run_dir, tmp_path):
    from reasoning_rl.cli import main

    out = tmp_path / "r.html"
    assert main(["report", str(run_dir), "-o", str(out)]) == 0 and out.read_text().startswith("<!DOCTYPE html>")
    assert main(["report", str(tmp_path / "missing")]) == 2  # one line, exit 2
    p = subprocess.Popen([PY, "-m", "reasoning_rl", "report", str(run_dir), "--serve", "--port", "0"],
                         stdout=subprocess.PIPE, text=True, env=run_env(), cwd=ROOT)
    try:
        line = p.stdout.readline()
        url = line.split(" on ", 1)[1].split()[0]
        body = urllib.request.urlopen(url, timeout=30).read().decode()
        assert '<meta http-equiv="refresh" content="15">' in body and str(run_dir) in body
        with open(run_dir / "metrics.jsonl") as f:  # a round lands: the next load shows it
            n = len([x for x in f if x.strip()])
        again = urllib.request.urlopen(url, timeout=30).read().decode()
        assert again.count('"step"') >= n
    finally:
        p.terminate()
        p.wait(timeout=30)


# ------------------------------------------------------------------ in a real browser
def _browser():
    """Headless Debian chromium through Selenium and the system chromedriver; None (skip) where either is missing,
    a failure under CI=true (the set-up installs both there)."""
    missing = [p for p in ("/usr/bin/chromium", "/usr/bin/chromedriver") if not os.path.exists(p)]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("selenium")
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"browser tests: {missing} missing under CI (scripts/setup_venv.sh installs them)")
        pytest.skip(f"browser tests: {missing} missing (scripts/setup_venv.sh installs them as root)")
    opts = webdriver.ChromeOptions()
    for a in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--window-size=1400,1000"):
        opts.add_argument(a)
    opts.add_argument(f"--user-data-dir={os.path.join(os.environ.get('TMPDIR', '/tmp'), f'rrl-chromium-{os.getpid()}')}")
    opts.binary_location = "/usr/bin/chromium"
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)


@pytest.fixture(scope="module")
def browser():
    d = _browser()
    yield d
    d.quit()


@pytest.mark.timeout(300)
def test_the_report_in_a_headless_browser(run_dir, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    rep = write_report(str(run_dir))
    d = browser
    d.get("file://" + rep.run["written"])
    errors = [e for e in d.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert errors == []
    # plots are drawn from the data, and are the same numbers as metrics.jsonl
    metrics = _lines(run_dir / "metrics.jsonl")
    dots = d.find_elements(By.CSS_SELECTOR, 'svg[data-key="reward/mean"] circle')
    assert [(int(c.get_attribute("data-step")), float(c.get_attribute("data-value"))) for c in dots] == \
        [(m["step"], m["reward/mean"]) for m in metrics if "reward/mean" in m]
    assert len(d.find_elements(By.CSS_SELECTOR, 'svg[data-key="eval/accuracy"] .error-bar')) == \
        sum("eval/accuracy" in m for m in metrics)  # held-out accuracy with its error bars
    d.save_screenshot(str(tmp_path / "overview.png"))
    # rollouts: the filters change what is shown
    d.find_element(By.ID, "tab-rollouts").click()
    total = len(rep.samples)
    assert d.find_element(By.ID, "count").text == f"{total} of {total} samples"
    statuses = [r[COL["status"]] for r in rep.samples]
    Select(d.find_element(By.ID, "f-status")).select_by_value("incorrect")
    want = statuses.count("incorrect")
    assert d.find_element(By.ID, "count").text == f"{want} of {total} samples"
    shown = d.find_elements(By.CSS_SELECTOR, "#rows tr.row td:nth-child(4)")
    assert shown and {td.text for td in shown} == {"incorrect"}
    Select(d.find_element(By.ID, "f-status")).select_by_value("")
    d.find_element(By.ID, "f-text").send_keys("zzz-no-such-text")
    assert d.find_element(By.ID, "count").text == f"0 of {total} samples"
    d.find_element(By.ID, "f-text").clear()
    d.execute_script("document.getElementById('f-text').dispatchEvent(new Event('input'))")
    # a sample with a highlighted answer: its verdict and the part the verifier read are on screen
    i = next(k for k, r in enumerate(rep.samples) if r[COL["hl"]])
    d.execute_script(f"select({i})")
    detail = d.find_element(By.ID, "detail")
    row = rep.samples[i]
    start, end = row[COL["hl"]]
    assert detail.find_element(By.CSS_SELECTOR, "mark.read").text == row[COL["text"]][start:end].strip()
    assert row[COL["status"]] in detail.find_element(By.ID, "verdicts").text
    # its group, side by side: every sample of (step, prompt), with advantages
    d.find_element(By.ID, "show-group").click()
    cards = d.find_elements(By.CSS_SELECTOR, "#group .group-sample")
    members = [r for r in rep.samples if (r[COL["step"]], r[COL["prompt_id"]]) == (row[COL["step"]], row[COL["prompt_id"]])]
    assert len(cards) == len(members) and all("advantage" in c.text for c in cards)
    tops = {c.location["y"] for c in cards}
    assert len(tops) < len(cards)  # side by side, not one under another
    d.save_screenshot(str(tmp_path / "rollouts.png"))
    # re-verification: flips listed, each linked to its sample
    d.find_element(By.ID, "tab-reverify").click()
    assert d.find_elements(By.CSS_SELECTOR, "#flip-table tr") and "flips" in d.find_element(By.ID, "flip-summary").text
    d.find_element(By.ID, "tab-prompts").click()
    assert len(d.find_elements(By.CSS_SELECTOR, "#prompt-table tr")) == len({r[COL["prompt_id"]] for r in rep.samples})
    # the curriculum: the ledger's entry and the next draw's chance beside each prompt, each group's decision
    pid, e = next(iter(rep.curriculum["ledger"].items()))
    row = next(tr for tr in d.find_elements(By.CSS_SELECTOR, "#prompt-table tr") if tr.text.startswith(pid))
    assert row.find_element(By.CSS_SELECTOR, "td.ledger").text.startswith(f"{e['passes']}/{e['attempts']} passed")
    assert row.find_element(By.CSS_SELECTOR, "td.draw").text == f"{100 * e['p_draw']:.2f}%"
    assert "(kept)" in row.find_element(By.CSS_SELECTOR, "td.decisions").text
    assert "sampler mixed_band" in d.find_element(By.ID, "curriculum-summary").text
    assert [e for e in d.get_log("browser") if e["level"] in ("SEVERE", "ERROR")] == []
    for shot in ("overview.png", "rollouts.png"):  # screenshots are not blank
        from PIL import Image

        img = Image.open(tmp_path / shot).convert("L")
        lo, hi = img.getextrema()
        assert hi - lo > 100 and len(set(img.getdata())) > 20, shot


@pytest.mark.timeout(300)
def test_a_run_whose_engine_is_not_the_trainer_shows_its_mismatch_and_correction(tmp_path, browser):
    """The worker engine samples in another process, so the run logs the engine-vs-trainer mismatch KL and the
    rollout correction's weights: the page draws each of them from metrics.jsonl, point for point."""
    from selenium.webdriver.common.by import By

    from reasoning_rl.trainers.grpo import train_grpo

    out = tmp_path / "worker"
    train_grpo(config.load(Config, overrides=RUN + ["grpo.engine=worker", "grpo.steps=2", f"output_dir={out}"]),
               log=lambda *_: None)
    metrics = _lines(out / "metrics.jsonl")
    keys = ("rollout/mismatch_kl", "rollout/ratio_outside", "rollout/is_weight_mean", "rollout/is_weight_max")
    assert all(any(k in m for m in metrics) for k in keys), "the run logged no correction: the test proves nothing"
    browser.get("file://" + write_report(str(out)).run["written"])
    for k in keys:
        dots = browser.find_elements(By.CSS_SELECTOR, f'svg[data-key="{k}"] circle')
        assert [(int(c.get_attribute("data-step")), float(c.get_attribute("data-value"))) for c in dots] == \
            [(m["step"], m[k]) for m in metrics if k in m], k
    assert [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")] == []


@pytest.mark.timeout(300)
def test_an_episode_is_shown_turn_by_turn(tmp_path, browser):
    """A multi-turn run (every segment answered by an observation): each sample's turns are in the page, and the
    detail shows the model's text and the tool's output turn by turn."""
    from selenium.webdriver.common.by import By

    from reasoning_rl.rollout.environments import ENVIRONMENTS
    from reasoning_rl.trainers.grpo import train_grpo

    from .helpers.episodes import RUN as EPISODE_RUN
    from .helpers.turns import EveryTurnIsACall

    out = tmp_path / "episodes"
    ENVIRONMENTS.add("every-turn-report", EveryTurnIsACall, "tests")
    try:
        train_grpo(config.load(Config, overrides=EPISODE_RUN + ["grpo.steps=1", "grpo.environment=every-turn-report",
                                                                f"output_dir={out}"]), log=lambda *_: None)
    finally:
        ENVIRONMENTS.remove("every-turn-report")
    rep = write_report(str(out))
    assert len(rep.turns) == len(rep.samples) == 16
    assert all(t[0]["observation"] == EveryTurnIsACall.OBS for t in rep.turns.values())
    browser.get("file://" + rep.run["written"])
    browser.find_element(By.ID, "tab-rollouts").click()
    browser.execute_script("select(0)")
    turns = browser.find_element(By.ID, "turns")
    assert "turn 1: model" in turns.text and "tool output" in turns.text
    assert len(turns.find_elements(By.CSS_SELECTOR, "pre.turn-tool")) == sum(
        bool(t.get("observation")) for t in rep.turns[0])
    # the overview's calls-per-episode curve: each round's tools/calls_per_sample, point for point
    browser.find_element(By.ID, "tab-overview").click()
    metrics = [m for m in _lines(out / "metrics.jsonl") if "tools/calls_per_sample" in m]
    assert metrics and all(m["tools/calls_per_sample"] > 0 for m in metrics)  # every turn called: not a flat zero
    dots = browser.find_elements(By.CSS_SELECTOR, 'svg[data-key="tools/calls_per_sample"] circle')
    assert [(int(c.get_attribute("data-step")), float(c.get_attribute("data-value"))) for c in dots] == \
        [(m["step"], m["tools/calls_per_sample"]) for m in metrics]
    browser.save_screenshot(str(tmp_path / "tool_overview.png"))
    assert [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")] == []


def test_a_run_without_updates_says_so_and_a_report_the_run_went_past_is_marked_stale(tmp_path, browser):
    """An untrained tiny model whose every group fails: the overview says first that no round updated the model, a
    flat chart reads as one value, and once the run is extended (resumed past its end) the page written before says
    it is stale and how to rebuild it."""
    from selenium.webdriver.common.by import By

    from reasoning_rl.cli import main

    out = tmp_path / "idle"
    run = ["train", "grpo", "--set", "model.sft_warm_start=false", "--set", "model.tiny.num_layers=1", "--set",
           "grpo.prompts_per_step=4", "--set", "grpo.group_size=4", "--set", "grpo.eval_every=0", "--set",
           "grpo.eval_at_start=false", "--set", "grpo.eval_at_end=false", "--set", "grpo.verifier_workers=1",
           "--set", "generation.max_tokens=3", "--set", "grpo.max_refill_rounds=0", "--set", "grpo.checkpoint_every=1",
           "--set", f"output_dir={out}"]
    assert main([*run, "--set", "grpo.steps=2"]) == 0
    assert all(m["train/samples"] == 0 for m in _lines(out / "metrics.jsonl"))
    rep = write_report(str(out))
    browser.get("file://" + rep.run["written"])
    assert browser.find_element(By.ID, "no-update").text.startswith("no round updated the model: all 2 rounds trained "
                                                                   "nothing")
    assert browser.find_element(By.ID, "finished").text == "finished: all 2 steps"
    flat = browser.find_elements(By.CSS_SELECTOR, 'svg[data-key="groups/pct_mixed"] text.flat')
    assert flat and flat[0].text == "every step 0"
    assert not browser.find_elements(By.ID, "stale")
    assert main([*run, "--set", "grpo.steps=3", "--resume"]) == 0  # the run goes on past the page
    browser.get("file://" + rep.run["written"])
    assert browser.find_element(By.ID, "stale").text == (
        f"stale: the run went on after this page was built (at step 2); rebuild it with: reasoning-rl report {out}")
    browser.save_screenshot(str(tmp_path / "idle.png"))
    assert [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")] == []


@pytest.mark.timeout(300)
def test_a_run_with_two_reward_terms_normalised_per_term_draws_each_terms_advantage(tmp_path, browser):
    """grpo.reward_normalization=per_term with the outcome and a format term: each term's share of the advantage and
    its spread within groups are in metrics.jsonl every round, and the page draws each of them point for point."""
    from selenium.webdriver.common.by import By

    from reasoning_rl.trainers.grpo import train_grpo

    out = tmp_path / "terms"
    reward = "tasks.reward=[{verifier: math, weight: 1.0}, {verifier: soft_length, weight: 0.5, " \
             "options: {max_length: 8, cache_length: 7}}]"
    train_grpo(config.load(Config, overrides=RUN + [reward, "grpo.reward_normalization=per_term", "grpo.steps=3",
                                                    f"output_dir={out}"]), log=lambda *_: None)
    metrics = [m for m in _lines(out / "metrics.jsonl") if m["step"] > 0]
    keys = [f"advantage/term/{t}/{what}" for t in ("math", "soft_length") for what in ("share", "spread")]
    assert all(k in m for m in metrics for k in keys if m.get("train/samples")), metrics
    browser.get("file://" + write_report(str(out)).run["written"])
    for k in keys:
        dots = browser.find_elements(By.CSS_SELECTOR, f'svg[data-key="{k}"] circle')
        assert [(int(c.get_attribute("data-step")), float(c.get_attribute("data-value"))) for c in dots] == \
            [(m["step"], m[k]) for m in metrics if k in m], k
    browser.save_screenshot(str(tmp_path / "terms.png"))  # looked at: the three term charts beside the others
    assert [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")] == []


@pytest.mark.timeout(300)
def test_a_distillation_runs_report_names_its_teacher_and_draws_the_teachers_signal(tmp_path, browser):
    """A distillation run's header names the teacher and the loss; its curves include the reverse KL to the teacher
    and the teacher's log-prob of the sampled tokens, point for point."""
    from selenium.webdriver.common.by import By

    from reasoning_rl.trainers.distill import train_distill

    out = tmp_path / "distill"
    train_distill(config.load(Config, overrides=[o.replace("grpo.", "distill.") for o in RUN]
                  + ["distill.teacher=tiny", "distill.steps=2", f"output_dir={out}"]), log=lambda *_: None)
    browser.get("file://" + write_report(str(out)).run["written"])
    info = browser.find_element(By.ID, "run-info").text
    assert "kind: distill" in info and "teacher: tiny" in info and "loss: reverse_kl" in info
    metrics = _lines(out / "metrics.jsonl")
    for k in ("distill/reverse_kl", "distill/teacher_logprob"):
        dots = browser.find_elements(By.CSS_SELECTOR, f'svg[data-key="{k}"] circle')
        assert dots and [(int(c.get_attribute("data-step")), float(c.get_attribute("data-value"))) for c in dots] \
            == [(m["step"], m[k]) for m in metrics if k in m], k
