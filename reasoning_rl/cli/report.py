"""`reasoning-rl report RUN_DIR`: one self-contained HTML page to look at a run with, every sample beside its verdict.

    build_report(run_dir) -> Report            the run's data, read tolerantly (what was skipped, and why)
    write_report(run_dir, out=None) -> Report  RUN_DIR/report.html: no network, no CDN, opens from disk
    serve(run_dir, port)                       the same page on localhost, rebuilt at each load (a run in progress)

Pages (reasoning_rl/cli/report_page.html draws them from the data embedded in the file):
  Overview        task, model, config as written, reward terms; the curves a user reads first, drawn from
                  metrics.jsonl (the same numbers), alerts marked where they fired; where wall time went per round
  Rollouts        every archived sample, filterable (step, prompt, status, reward, extraction path, length,
                  truncation, free text) and paged; a sample's verdicts with the verifier's version and options hash,
                  the span the outcome verifier read highlighted; a group's samples side by side with advantages
  Prompts         per prompt: its pass rate at each step it was sampled and the curriculum's decision on each group
                  (kept, or dropped by the mixed filter and why), the ledger's entry (attempts, passes, EMA, streak,
                  retired at), and the chance the run's sampler draws it next; a link to its samples
  Re-verification the flips of `reasoning-rl reverify` per step and kind, each linked to its sample

Reads what any command writes: a training run (metrics, archive, task.json, run_config.json), `eval` (archive,
summary.json), `reverify` (reverify/flips.jsonl), a DPO run (metrics only). A damaged file (a truncated last line,
a line that is not JSON) is skipped line by line and named in `Report.skipped`; a missing one is named too.

A multi-turn episode (grpo.environment) is shown turn by turn: the model's text, the tool's output, its time, and
whether the program failed or the environment did.

Not here: the metrics themselves (trainers/metrics.py), re-scoring (cli/reverify.py). The ledger is the run's latest
(a checkpoint's copy is not read); the draw chance is what the sampler would give now, not at each step.
"""
from __future__ import annotations

import functools
import json
import os
import sqlite3
from dataclasses import dataclass, field
from importlib import resources

from ..errors import UserError

PAGE = "report_page.html"
SAMPLE_COLUMNS = ("step", "prompt_id", "index", "status", "reward", "path", "tokens", "cut", "text", "hl")


@dataclass
class Report:
    """What a run directory holds, as the page shows it, and what could not be read."""
    run_dir: str
    run: dict = field(default_factory=dict)  # kind, task, config, summary
    metrics: list[dict] = field(default_factory=list)
    samples: list[list] = field(default_factory=list)  # rows of SAMPLE_COLUMNS
    verdicts: list[dict] = field(default_factory=list)  # per sample: verifier -> [status, score, detail]
    turns: dict[int, list] = field(default_factory=dict)  # sample index -> its episode's turns (multi-turn runs)
    prompts: dict[str, str] = field(default_factory=dict)  # prompt id -> prompt text
    flips: list[dict] = field(default_factory=list)
    curriculum: dict = field(default_factory=dict)  # sampler and filter, ledger entries, each group's decision
    skipped: list[str] = field(default_factory=list)

    def data(self) -> dict:
        return {"run": self.run, "metrics": self.metrics, "columns": list(SAMPLE_COLUMNS), "samples": self.samples,
                "verdicts": self.verdicts, "turns": self.turns, "prompts": self.prompts, "flips": self.flips,
                "curriculum": self.curriculum, "skipped": self.skipped}


def _jsonl(path: str, skipped: list[str]) -> list[dict]:
    """The JSON lines of a file; a line that does not parse (a run killed mid-write) is skipped and named."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                skipped.append(f"{os.path.basename(path)}:{n}: not a complete JSON line (skipped)")
    return out


def _json(path: str, skipped: list[str]) -> dict | None:
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        skipped.append(f"{os.path.basename(path)}: not readable JSON ({e}); left out")
        return None


@functools.lru_cache(maxsize=None)
def _answer_key(outcome: str):
    """The outcome verifier's `answer_key` (None when it has none or is not registered): looked up once a run, not
    once a sample."""
    import verifiers

    return getattr(verifiers.get(outcome), "answer_key", None) if outcome in verifiers.names() else None


def _highlight(outcome: str, text: str) -> list[int] | None:
    """[start, end) of the answer the outcome verifier read in `text`: its last occurrence (None when the verifier
    has no `answer_key` or found nothing)."""
    key = _answer_key(outcome)
    answer = key(text) if key else None
    if not answer:
        return None
    at = text.rfind(answer)
    return [at, at + len(answer)] if at >= 0 else None


def _kind(run_dir: str, config: dict | None, summary: dict | None) -> str:
    if config:
        return config.get("algorithm", "train")
    if os.path.isdir(os.path.join(run_dir, "dpo_ours")) or os.path.isdir(os.path.join(run_dir, "dpo_trl")):
        return "dpo"
    if summary and "samples_per_prompt" in summary:
        return "eval"
    return "run"


def _curriculum(run_dir: str, config: dict | None, outcome: str, groups: dict, skipped: list[str]) -> dict:
    """The curriculum's view of a training run: its sampler and filter (from run_config.json), each archived group's
    decision under the run's filter (the same function the loop calls), and the ledger's entries with the chance
    the sampler draws each prompt next. Empty for a run without a ledger (eval, DPO)."""
    from curricula import FILTERS, make_sampler, read_entries
    from ..types import Group, Sample, Verdict

    path = os.path.join(run_dir, "ledger.sqlite")
    if not config or not os.path.exists(path):
        return {}
    rl = (config.get("config") or {}).get(config.get("algorithm", ""), {})
    out = {"sampler": rl.get("sampler", "uniform"), "filter_mixed": bool(rl.get("filter_mixed", False)),
           "retire_after": rl.get("retire_after", 0), "groups": {}, "ledger": {}}
    for (step, pid), drawn in groups.items():
        decisions = []
        for verdicts in drawn:
            g = Group(pid, "", {}, [Sample("", verdicts={outcome: Verdict(st, sc)}) for st, sc in verdicts])
            d = FILTERS.get("mixed")(g, outcome)
            decisions.append("kept" if d.keep or not out["filter_mixed"] else f"dropped: {d.reason}")
        out["groups"].setdefault(pid, {})[step] = decisions
    try:
        entries = read_entries(path)
    except sqlite3.Error as e:
        skipped.append(f"ledger.sqlite: not readable ({e}); no ledger on the Prompts page")
        return out
    if entries:
        class _Read:  # the sampler reads entries() only
            def entries(self):
                return entries
        ids = sorted(set(entries) | {pid for _, pid in groups})
        try:
            probs = make_sampler(out["sampler"], ids, G=int(rl.get("group_size", 2)), ledger=_Read()).probabilities()
        except ValueError:  # every prompt retired
            probs = {}
        out["ledger"] = {pid: {"attempts": e.attempts, "passes": e.passes, "ema": e.ema, "streak": e.streak,
                               "retired_at": e.retired_at if e.retired else None, "p_draw": probs.get(pid)}
                         for pid, e in entries.items()}
    return out


def build_report(run_dir: str) -> Report:
    """Everything the page shows, read from `run_dir`; UserError when it holds nothing a report can show."""
    from ..trainers.monitors import pass_category

    if not os.path.isdir(run_dir):
        raise UserError(f"report: {run_dir!r} is not a directory")
    rep = Report(run_dir)
    sk = rep.skipped
    path = lambda name: os.path.join(run_dir, name)  # noqa: E731
    task = _json(path("task.json"), sk) or {}
    config = _json(path("run_config.json"), sk)
    summary = _json(path("summary.json"), sk)
    outcome = task.get("outcome", "")
    weights = {t["verifier"]: t["weight"] for t in task.get("terms", [])}
    versions = {t["verifier"]: {"version": t.get("version"), "options_hash": t.get("options_hash"),
                                "options": t.get("options", {})} for t in task.get("terms", [])}
    cfg = (config or {}).get("config") or (summary or {}).get("config")
    algo = (config or {}).get("algorithm")
    rep.run = {"dir": os.path.abspath(run_dir), "kind": _kind(run_dir, config, summary), "task": task,
               "config": cfg, "summary": summary, "verifiers": versions,
               "finished": _json(path("finished.json"), []) if os.path.exists(path("finished.json")) else None,
               "planned_steps": ((cfg or {}).get(algo) or {}).get("steps") if algo else None,
               "stale": False}  # set true in the written file by run_dir.mark_report_stale when the run goes on
    if os.path.exists(path("metrics.jsonl")):
        rep.metrics = _jsonl(path("metrics.jsonl"), sk)
    else:
        sk.append("metrics.jsonl: missing (no curves)")
    groups: dict[tuple[int, str], list] = {}  # (step, prompt) -> each group drawn: its samples' outcome verdicts
    if os.path.exists(path("archive.jsonl")):
        for r in _jsonl(path("archive.jsonl"), sk):
            try:
                v = r["verdicts"]
                out = v.get(outcome) or next(iter(v.values()), None)
                status = out["status"] if out else "unverified"
                scored = [(k, x) for k, x in v.items() if k in weights]
                masked = out is None or out["score"] is None
                reward = None if masked else sum(weights[k] * (x["score"] or 0.0) for k, x in scored)
                path_kind = pass_category(out["detail"]) if out else ""
                text = r["text"]
                rep.prompts.setdefault(str(r["prompt_id"]), r.get("prompt", ""))
                rep.samples.append([int(r["step"]), str(r["prompt_id"]), int(r.get("index", 0)), status, reward,
                                    path_kind, int(r.get("n_tokens", 0)), r.get("finish_reason") == "length", text,
                                    _highlight(outcome, text) if out and outcome else None])
                rep.verdicts.append({k: [x["status"], x["score"], x.get("detail", "")] for k, x in v.items()})
                if out:  # a refill may draw the same prompt again in a step: a new group starts at index 0
                    drawn = groups.setdefault((int(r["step"]), str(r["prompt_id"])), [])
                    if not drawn or int(r.get("index", 0)) == 0:
                        drawn.append([])
                    drawn[-1].append((out["status"], out["score"]))
                if r.get("turns"):  # an episode: each turn's model text, tool call, observation, timings
                    rep.turns[len(rep.samples) - 1] = [{k: t.get(k) for k in ("model", "observation", "tool_s",
                                                                                "program_error", "tokens")}
                                                       for t in r["turns"]] + ([{"error": r["error"]}]
                                                                               if r.get("error") else [])
            except (KeyError, TypeError, ValueError) as e:
                sk.append(f"archive.jsonl: a line without {e} (skipped)")
    else:
        sk.append("archive.jsonl: missing (no rollouts)")
    if os.path.exists(path(os.path.join("reverify", "flips.jsonl"))):
        rep.flips = [{k: f.get(k) for k in ("step", "prompt_id", "index", "verifier", "flip", "old", "new")}
                     for f in _jsonl(path(os.path.join("reverify", "flips.jsonl")), sk)]
    rep.curriculum = _curriculum(run_dir, config, outcome, groups, sk)
    if not rep.metrics and not rep.samples:
        raise UserError(f"report: {run_dir!r} holds neither metrics.jsonl nor archive.jsonl (not a run directory)")
    return rep


def render(rep: Report, refresh_s: int = 0) -> str:
    """The page: report_page.html with the run's data embedded as JSON (and a reload every `refresh_s`)."""
    page = resources.files("reasoning_rl.cli").joinpath(PAGE).read_text(encoding="utf-8")
    data = json.dumps(rep.data(), ensure_ascii=False, separators=(",", ":"), default=str)
    data = data.replace("</", "<\\/")  # a sample that writes </script> stays inside the data block
    meta = f'<meta http-equiv="refresh" content="{refresh_s}">' if refresh_s else ""
    return page.replace("<!--REFRESH-->", meta).replace("/*DATA*/null", data)


def write_report(run_dir: str, out: str | None = None) -> Report:
    """RUN_DIR/report.html (or `out`), written whole (a temporary file renamed into place)."""
    rep = build_report(run_dir)
    out = out or os.path.join(run_dir, "report.html")
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(render(rep))
    os.replace(tmp, out)
    rep.run["written"] = out
    return rep


def serve(run_dir: str, port: int = 8765, refresh_s: int = 15, log=print) -> None:
    """The report on http://127.0.0.1:PORT/, rebuilt from the run directory at each load (reloads itself every
    `refresh_s` seconds, so a run in progress shows its new rounds). Ctrl-C stops it."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    build_report(run_dir)  # a directory with nothing to show fails here, before the server starts

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the http.server name
            if self.path not in ("/", "/index.html"):
                self.send_error(404)
                return
            body = render(build_report(run_dir), refresh_s).encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # quiet: one line at start is enough
            pass

    with ThreadingHTTPServer(("127.0.0.1", port), Handler) as httpd:
        log(f"report of {run_dir} on http://127.0.0.1:{httpd.server_address[1]}/ (rebuilt at each load; Ctrl-C stops)")
        httpd.serve_forever()
