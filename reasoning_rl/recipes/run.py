"""`reasoning-rl recipe`: the stages in order, each from the model the one before left, each scored on the held-out
split, the whole resumable stage by stage, one table at the end and the last model in `DIR/final`.

    run_recipe(cfg, out, resume=False, log=print) -> Record

`DIR/recipe.json` (record.py) says where each stage stands. A rerun with `--resume` skips the stages that are done
and continues the one that was cut short from what it kept (a checkpoint, finished evaluation batches); a stage cut
short before it kept anything starts again, its half-written folder cleared, and says so. A stage that fails is
recorded with its error and reported in one line; the stages before it stay as they are. Stopped by Ctrl-C or
SIGTERM, the stage in progress stops as its command would (after its step, round or batch, with what it kept).

At the end: `DIR/summary.md` and `summary.json` (each stage's held-out score with its standard error, its training and
evaluation seconds), the same table on the log, and `DIR/final`: the last stage's model as one Hugging Face folder
(adapters merged into their base), with the prompt format it was trained with, what a user evaluates or serves next.

Not here: what each stage does (stages.py).
"""
from __future__ import annotations

import os
import shutil
import time

from ..config.knobs import changes, to_dict
from ..config.sections import Config
from ..errors import UserError
from ..interrupts import Interrupted, stop_requests
from .record import Record, StageState
from .stages import STAGES, Ctx, Trained, score

TRAINED = "trained.json"
# config keys a resumed recipe may change: how long its later stages run, how it is scored and logged
KEEP = ("output_dir", "eval.batch_prompts", "num_threads", "cpu_allocator", "sft.log_every",
        "sft.checkpoint_every")


def plan(cfg: Config) -> list[str]:
    """The stages this config runs: `base` (the start model's score) when recipe.eval_base, then recipe.stages."""
    bad = [s for s in cfg.recipe.stages if s not in STAGES]
    if bad or not cfg.recipe.stages:
        raise UserError(f"recipe.stages: value {list(cfg.recipe.stages)!r} "
                        + (f"names an unknown stage {bad[0]!r}" if bad else "is empty")
                        + f"; valid: {', '.join(STAGES)}")
    if "distill" in cfg.recipe.stages and not (cfg.recipe.teacher or cfg.distill.teacher):
        raise UserError("recipe.stages: the distill stage needs a teacher: --set recipe.teacher=MODEL")
    return (["base"] if cfg.recipe.eval_base else []) + list(cfg.recipe.stages)


def scaled(cfg: Config) -> Config:
    """cfg with every stage's steps times recipe.scale (at least 1)."""
    import dataclasses

    f = cfg.recipe.scale
    if f == 1.0:
        return cfg
    n = lambda steps: max(1, round(steps * f))  # noqa: E731
    return dataclasses.replace(cfg, sft=dataclasses.replace(cfg.sft, steps=n(cfg.sft.steps)),
                               **{s: dataclasses.replace(getattr(cfg, s), steps=n(getattr(cfg, s).steps))
                                  for s in ("grpo", "ppo", "distill")})


def _open(cfg: Config, out: str, stages: list[str], resume: bool, log) -> Record:
    """The recipe's record: a new one, or with `resume` the one in `out` (its config must be this one)."""
    rec = Record.read(out)
    if rec is None:
        if resume:
            raise UserError(f"recipe --resume: {out!r} holds no recipe (recipe.json); start without --resume")
        return Record.start(out, stages, to_dict(cfg))
    if not resume:
        raise UserError(f"output_dir {out!r} already holds a recipe (recipe.json); pass --resume to continue it, or "
                        "choose another directory")
    changed = changes(rec.config, to_dict(cfg), KEEP)
    if changed:
        raise UserError(f"recipe --resume: the recipe in {out!r} was started with another config "
                        f"({'; '.join(changed[:4])}); run it as it was, or start a new one")
    done = sum(s.state == "done" for s in rec.stages)
    log(f"recipe: resuming {out}: {done} of {len(rec.stages)} stages done")
    return rec


def _resumable(rec: Record, st: StageState) -> bool:
    """Whether a stage cut short kept anything to go on from (a checkpoint, a trained model, evaluation batches)."""
    folder = rec.folder(st)
    marks = (TRAINED, "samples.jsonl", os.path.join("checkpoint", "state.pt"), "finished.json",
             os.path.join("final", "sft_checkpoint.pt"), os.path.join("final", "sft_done.json"),
             os.path.join("eval", "eval_progress.json"))
    return any(os.path.exists(os.path.join(folder, m)) for m in marks)


def _prepare(rec: Record, st: StageState, log) -> None:
    """A stage about to run: one cut short with nothing to go on from is cleared and started again (said once)."""
    folder = rec.folder(st)
    if st.state != "pending" and os.path.isdir(folder) and not _resumable(rec, st):
        log(f"recipe: stage {st.folder} was cut short ({st.state}) before it kept a checkpoint; its half-written "
            "folder is cleared and the stage starts again")
        shutil.rmtree(folder)
    elif st.state != "pending":
        log(f"recipe: stage {st.folder} goes on from what it kept ({st.state} before)")
    os.makedirs(folder, exist_ok=True)
    st.state, st.error = "running", ""
    rec.save()


def _train(ctx: Ctx, rec: Record, st: StageState) -> Trained | None:
    """The stage's training (none for `base`), once: TRAINED records it, so a rerun goes straight to scoring."""
    import json

    if st.name == "base":
        return None
    marker = os.path.join(ctx.folder, TRAINED)
    if os.path.isfile(marker):
        return Trained(st.final or ctx.path("final"))
    trained = STAGES[st.name](ctx)
    st.final = trained.final
    st.train_seconds += trained.seconds
    st.cpu_seconds += trained.cpu_seconds
    with open(marker, "w") as f:
        json.dump({"final": trained.final, "notes": trained.notes}, f)
    rec.save()
    return trained


def _run_stage(ctx: Ctx, rec: Record, st: StageState, log) -> None:
    t0 = time.time()
    try:
        trained = _train(ctx, rec, st)
        t1 = time.time()
        st.eval = score(ctx, trained)
        st.eval_seconds += time.time() - t1
    except Interrupted as e:
        st.state = "stopped"
        rec.save()
        raise Interrupted(f"recipe stopped in stage {st.folder}: {e}; continue the recipe with the same command and "
                          "--resume") from None
    except Exception as e:  # recorded and reported in one line: the stages before it are kept
        st.state, st.error = "failed", f"{type(e).__name__}: {' '.join(str(e).split())}"[:500]
        rec.save()
        raise UserError(f"recipe stage {st.folder} failed: {st.error}. The stages before it are kept in "
                        f"{rec.out}; fix the cause and rerun the same command with --resume") from e
    st.state = "done"
    rec.seconds += time.time() - t0
    rec.save()
    log(f"recipe: stage {st.folder} done: held-out {_pct(st.eval)}; training {st.train_seconds:.0f} s, evaluation "
        f"{st.eval_seconds:.0f} s")


def _between(stop, rec: Record, st: StageState | None) -> None:
    """Raise Interrupted if a signal came between two stages (the record already says where each stands)."""
    if stop.signal is not None:
        where = f"before stage {st.folder}" if st is not None else "before writing its final model"
        raise Interrupted(f"recipe stopped by {stop.signal} {where}; continue it with the same command and --resume "
                          f"(--set output_dir={rec.out})")


def _pct(m: dict) -> str:
    acc, se = m.get("greedy"), m.get("greedy_se")
    return "-" if acc is None else f"{acc:.3f} +- {se:.3f}"


def run_recipe(cfg: Config, out: str, resume: bool = False, log=print) -> Record:
    """Run (or with `resume` continue) the recipe of `cfg` in `out` (module docstring). Returns its record."""
    from ..models.load import load_tokenizer
    from ..task.task import Task

    stages = plan(cfg)
    given, cfg = cfg, scaled(cfg)
    task = Task.from_config(cfg.tasks)  # rows read and checked before any model loads
    if any(s in ("sft",) for s in stages):
        task.gold_rows()  # no gold solution column: one line now, not after the base model's evaluation
    task.render(load_tokenizer(cfg))
    task.note_dropped(log)
    task.note_format(cfg.model.name_or_path, cfg.generation.stop, log)
    rec = _open(given, out, stages, resume, log)
    start, earlier = cfg.model.name_or_path, []
    # a signal between stages (a stage's own run handles one within it): the recipe stops before the next stage
    with stop_requests(log, after="the stage in progress") as stop:
        for st in rec.stages:
            folder = rec.folder(st)
            if st.state != "done":
                _between(stop, rec, st)
                log(f"== recipe stage {st.folder}" + (f" from {start}" if st.name != "base" else f": {start} as is"))
                _prepare(rec, st, log)
                _run_stage(Ctx(cfg, start, folder, list(earlier), task, log), rec, st, log)
            else:
                log(f"recipe: stage {st.folder} done before: held-out {_pct(st.eval)}")
            if st.name != "base":
                start, earlier = st.final, earlier + [folder]
        _between(stop, rec, None)
        export_final(cfg, start, os.path.join(out, "final"), log)
    write_summary(rec, log)
    return rec


def export_final(cfg: Config, src: str, dst: str, log) -> None:
    """The recipe's last model as one plain folder: adapters merged into their base, the tokenizer, the prompt format
    it was trained with. Written beside and renamed into place."""
    from ..config import prompt_format
    from ..models.load import load_pretrained

    if os.path.isfile(os.path.join(dst, "config.json")):
        return
    tmp = f"{dst}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    model, tok = load_pretrained(cfg, src, log=log)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    fmt = prompt_format.read(src)
    if fmt is not None:
        shutil.copy(os.path.join(src, prompt_format.FILE), os.path.join(tmp, prompt_format.FILE))
    else:
        prompt_format.write(tmp, cfg)
    shutil.rmtree(dst, ignore_errors=True)
    os.replace(tmp, dst)
    log(f"recipe: the last stage's model -> {dst} (evaluate it with `reasoning-rl eval --set "
        f"model.name_or_path={dst}`)")


def summary_rows(rec: Record) -> list[dict]:
    """One row per stage: its held-out greedy accuracy and standard error, format split, seconds."""
    rows = []
    for st in rec.stages:
        m = st.eval
        rows.append({"stage": st.folder, "prompts": m.get("prompts"), "accuracy": m.get("greedy"),
                     "se": m.get("greedy_se"), "parseable": m.get("parseable"),
                     "cut": m.get("cut"), "train_s": round(st.train_seconds, 1), "cpu_s": round(st.cpu_seconds, 1),
                     "eval_s": round(st.eval_seconds, 1), "state": st.state})
    return rows


def write_summary(rec: Record, log) -> None:
    import json

    rows = summary_rows(rec)
    head = ("| stage | held-out greedy | parseable | cut | training s (CPU s) | evaluation s |\n"
            "| --- | --- | --- | --- | --- | --- |")
    lines = [head] + [f"| {r['stage']} | {_fmt(r['accuracy'])} +- {_fmt(r['se'])} ({r['prompts']} prompts) | "
                      f"{_fmt(r['parseable'])} | {_fmt(r['cut'])} | {r['train_s']:.0f} ({r['cpu_s']:.0f}) | "
                      f"{r['eval_s']:.0f} |" for r in rows]
    total = sum(r["train_s"] + r["eval_s"] for r in rows)
    lines.append(f"\nwall time of the stages: {total:.0f} s ({total / 60:.1f} min); the recipe in all: "
                 f"{rec.seconds:.0f} s over its invocations")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(rec.out, "summary.md"), "w") as f:
        f.write(text)
    with open(os.path.join(rec.out, "summary.json"), "w") as f:
        json.dump({"stages": rows, "seconds": round(rec.seconds, 1)}, f, indent=1)
    for line in lines:
        log(line)


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.3f}"
