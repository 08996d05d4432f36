"""The data commands: `curate`, `pairs`, `eval`, `task check`, `reverify`, and `sft` of a model other than tiny.

Each reads the configured task (reasoning_rl/task/task.py) through `cli_args.load_task`, so a bad column, split or
verifier is one line before any model loads. Not here: the parser (cli/commands.py), the training
commands (cli/train.py).
"""
from __future__ import annotations

import json
import sys

from .args import load_config, load_task, set_threads as _set_threads
from ..errors import UserError


def _sft_run(cfg, args, rows: list[dict], task, before: bool) -> int:
    """SFT of the configured model on `rows` into --output (trainers/sft.py: checkpoints, stop, --resume); the
    held-out accuracy after (and before, with `before`)."""
    from ..eval import held_out
    from ..models.load import load_policy
    from ..models.lora import maybe_lora
    from ..trainers.sft import Finished, check_output, run_sft

    try:
        check_output(args.output, args.resume, cfg.sft.steps)
    except Finished as e:
        print(f"reasoning-rl sft: {e}", file=sys.stderr)
        return 0
    evals = task.rows("test")[: cfg.eval.size]
    _set_threads(cfg)
    model, tok = load_policy(cfg)
    model = maybe_lora(model, cfg)
    rl = cfg.grpo if cfg.grpo.environment else None  # a model trained in episodes is scored in them
    acc0 = held_out.configured(cfg, task, model, tok, evals, rl=rl)["accuracy"] if before and not args.resume else None
    res = run_sft(cfg, model, tok, rows, args.output, resume=args.resume,
                  log=lambda m: print(m, file=sys.stderr))
    acc = held_out.configured(cfg, task, model, tok, evals, rl=rl)["accuracy"]
    resumed = f", resumed at step {res.resumed_from}" if res.resumed_from else ""
    print(f"sft ({len(rows)} targets, {res.steps} steps of {cfg.sft.batch_size}{resumed}, {res.seconds:.0f} s): "
          f"{res.path}")
    print(f"held-out accuracy: {'' if acc0 is None else f'{acc0:.3f} -> '}{acc:.3f} ({len(evals)} prompts, greedy, "
          f"{task.outcome})")
    return 0


def _sft_on_target(cfg, args) -> int:
    """SFT of any Hugging Face model on the task's gold completions (tasks.target_col, or the preset's)."""
    if not args.output:
        raise UserError(f"sft: model.name_or_path={cfg.model.name_or_path!r}: give --output DIR for the trained model "
                        "(only the embedded tiny model has a cached warm start)")
    from ..data.gold_traces import gold_targets
    from ..models.load import load_tokenizer

    task = load_task(cfg)
    rows, summary = gold_targets(task, load_tokenizer(cfg), cfg.grpo)
    print(f"sft on {summary.line()}", file=sys.stderr)
    return _sft_run(cfg, args, rows, task, before=False)


def sample_rows(task, tok, targets, where: str) -> list[dict]:
    """Verified samples (data/verified.py targets) as SFT rows: the prompt as the model saw it (a samples file's own
    prompt rendered as the task renders its own), and the completion's text, or an episode's ids and loss mask."""
    return [{"prompt": t.prompt if t.rendered else task.render_prompt(tok, t.prompt, f"{where} target {i}"),
             **({"ids": list(t.ids), "loss_mask": list(t.loss_mask)} if t.ids else {"completion": t.completion})}
            for i, t in enumerate(targets)]


def _sft_on_samples(cfg, args) -> int:
    """SFT of the configured model (the tiny one from its warm start too) on a file of verified samples: the passed
    ones by default (data/verified.py); held-out accuracy on the configured task before and after."""
    from ..data.verified import read_targets
    from ..models.load import load_tokenizer

    if not args.output:
        raise UserError("sft --samples: give --output DIR for the trained model")
    targets, summary = read_targets(args.samples, verifier=args.verifier, include_failed=args.all_samples)
    task = load_task(cfg)  # renders the task's prompts: a samples file's own prompts are rendered the same way
    print(f"sft on verified samples: {summary.line()}", file=sys.stderr)
    if args.steps:
        import dataclasses

        cfg = dataclasses.replace(cfg, sft=dataclasses.replace(cfg.sft, steps=args.steps))
    rows = sample_rows(task, load_tokenizer(cfg), targets, repr(args.samples))
    return _sft_run(cfg, args, rows, task, before=True)


def cmd_traces(args) -> int:
    """Generated tool problems as verified Python-tool episodes (data/tool_traces.py)."""
    if args.model:
        args.overrides = [*args.overrides, f"model.name_or_path={args.model}"]
    cfg = load_config(args)
    from ..data.tool_traces import end_of_turn, write_traces
    from ..models.load import load_tokenizer
    from ..task.embedded.tool_problems import GENERATORS, problems

    families = tuple(f.strip() for f in args.families.split(",") if f.strip())
    direct = tuple(f.strip() for f in args.direct.split(",") if f.strip())
    bad = [f for f in families if f not in GENERATORS]
    if bad or not families:
        raise UserError(f"traces --families: unknown family {bad[0] if bad else args.families!r}; valid: "
                        f"{', '.join(sorted(GENERATORS))}")
    if any(f not in families for f in direct):
        raise UserError(f"traces --direct: family {next(f for f in direct if f not in families)!r} is not among "
                        f"--families ({', '.join(families)})")
    tok = load_tokenizer(cfg)
    summary = write_traces(problems(args.n, cfg.seed, 1, families), tok, args.output,
                           end_ids=end_of_turn(tok) or None,
                           tool_format=args.tool_format, instruction=args.instruction or None, direct=direct)
    print(f"traces: {summary.written} of {args.n} problems written as tool episodes ({summary.left_out} left out: "
          f"a tool output or final answer that did not check) -> {summary.path}; train on them with "
          f"`reasoning-rl sft --samples {summary.path}`")
    return 0


def cmd_curate(args) -> int:
    if args.model:
        args.overrides = [*args.overrides, f"model.name_or_path={args.model}"]
    cfg = load_config(args)
    from ..data.curate import curate, write_rows
    from ..models.load import load_policy
    from ..rollout import SamplingConfig

    task, rows = load_task(cfg, args.split, args.limit)
    _set_threads(cfg)
    model, tok = load_policy(cfg)
    temperature = cfg.generation.temperature if args.temperature is None else args.temperature
    sampling = SamplingConfig.of(cfg.generation, temperature=temperature, stop=task.stops(cfg.generation.stop),
                                 max_tokens=args.max_tokens or cfg.generation.max_tokens, seed=cfg.seed)
    print(f"curate: {cfg.model.name_or_path} samples {args.n} per prompt at temperature {temperature:g}, top_p "
          f"{cfg.generation.top_p:g}, <= {sampling.max_tokens} tokens", file=sys.stderr)
    out, groups = curate(model, tok, task, rows, args.n, sampling, ledger_path=args.ledger)
    write_rows(out, args.output, groups, sampled={"model": cfg.model.name_or_path, "temperature": temperature,
                                                  "top_p": cfg.generation.top_p, "max_tokens": sampling.max_tokens,
                                                  "seed": cfg.seed})
    scored = [r for r in out if r["pass_rate"] is not None]
    if not scored:
        raise UserError(f"curate: every one of the {len(out)} prompts' samples was masked by {task.outcome!r} "
                        "(no verdict to compute a pass rate from); see the rows' masked column in "
                        f"{args.output}/data.jsonl")
    mixed = sum(r["mixed"] for r in out)
    mean = sum(r["pass_rate"] for r in scored) / len(scored)
    print(f"curated {len(out)} prompts x {args.n} samples ({task.outcome}): mean pass rate {mean:.3f}, "
          f"mixed {mixed} ({mixed / max(1, len(out)):.1%}), all pass {sum(r['pass_rate'] == 1 for r in scored)}, "
          f"all fail {sum(r['pass_rate'] == 0 for r in scored)} -> {args.output}")
    return 0


def _pair_config(args):
    from .. import config as _config
    from ..data.pairs import PairConfig

    return _config.from_dict(PairConfig, {"strategy": args.strategy, "k": args.k, "length_tolerance": args.length_tolerance,
                                          "min_margin": args.min_margin, "max_pairs_per_prompt": args.max_per_prompt,
                                          "dedup": not args.no_dedup}, prefix="pairs")


def cmd_pairs(args) -> int:
    cfg = load_config(args)
    from ..models.load import load_policy
    from ..data.pairs import write_pairs

    pair_cfg = _pair_config(args)
    if args.archive:
        import os

        import verifiers

        from ..data.archive import read_archive
        from ..data.pairs import build_pairs
        from ..task.task import outcome_of

        if not os.path.isfile(args.archive):
            raise UserError(f"--archive {args.archive!r} is not a file (a training run's archive.jsonl)")
        beside = os.path.join(os.path.dirname(os.path.abspath(args.archive)), "task.json")
        if not args.verifier and os.path.isfile(beside):  # the run recorded its outcome: pair on it
            with open(beside) as f:
                outcome = json.load(f)["outcome"]
        else:
            outcome = outcome_of(cfg.tasks)  # --verifier, or the configured task's outcome
        verifiers.get(outcome)  # an unknown name: one line listing the valid ones
        pairs, summary = build_pairs(read_archive(args.archive), outcome, pair_cfg, policy=args.archive)
    else:
        from ..data.curate import sample_pairs

        task, rows = load_task(cfg, args.split, args.limit)
        _set_threads(cfg)
        model, tok = load_policy(cfg)
        pairs, summary = sample_pairs(cfg, model, tok, task, rows, args.n, pair_cfg)
    write_pairs(pairs, args.output)
    if summary.get("episodes_skipped"):
        print(f"pairs: {summary['episodes_skipped']} samples are multi-turn episodes without their token ids (an "
              "archive from before they were kept); left out: their text drops the tool's outputs", file=sys.stderr)
    print(json.dumps(summary))
    return 0


def cmd_eval(args) -> int:
    """`reasoning-rl eval`: every finished batch kept (archive.jsonl, eval_progress.json); Ctrl-C or SIGTERM stops
    after the batch in progress (a second signal at once), --resume goes on; summary.json at the end."""
    import dataclasses
    import os

    from ..data.archive import provenance
    from ..eval.sampled import PROGRESS, EvalLog, run_eval
    from ..models.load import load_policy
    from ..rollout import SamplingConfig
    from ..interrupts import stop_requests
    from .args import claim_output_dir

    cfg = load_config(args)
    task, rows = load_task(cfg, args.split, args.limit)  # the held-out split (a file without one: its hash share)
    if args.resume and cfg.output_dir and os.path.exists(os.path.join(cfg.output_dir, "summary.json")):
        print(f"eval --resume: {cfg.output_dir!r} holds a finished evaluation (summary.json); nothing to do",
              file=sys.stderr)
        return 0
    cfg = claim_output_dir(cfg, args, "eval", resume_file=PROGRESS)
    os.makedirs(cfg.output_dir, exist_ok=True)
    described = task.describe(task.outcome_reward())
    n = 1 if args.temperature == 0 else args.n
    spec = {"rows": [r["prompt_id"] for r in rows], "n": n, "temperature": args.temperature,
            "greedy": not args.no_greedy, "batch_prompts": cfg.eval.batch_prompts, "model": cfg.model.name_or_path,
            "max_tokens": cfg.generation.max_tokens, "seed": cfg.seed}
    with open(os.path.join(cfg.output_dir, "task.json"), "w") as f:
        json.dump(described, f, indent=1)
    _set_threads(cfg)
    model, tok = load_policy(cfg)
    sampling = SamplingConfig.of(cfg.generation, temperature=args.temperature, seed=cfg.seed,
                                 stop=task.stops(cfg.generation.stop))
    engine = None
    if cfg.grpo.environment:  # every sample a multi-turn episode, as the run with this environment trains on
        from ..rollout.episodes import EpisodeEngine

        engine = EpisodeEngine.of(cfg.grpo, model, tok)
    try:
        announce_kernels(cfg, model, min(128, cfg.eval.batch_prompts * (n + (not args.no_greedy and n > 1))))
        with stop_requests(lambda s: print(s, file=sys.stderr),
                           after="the batch in progress (the finished ones are kept)") as stop:
            res = run_eval(model, tok, task, rows, args.n, sampling, greedy=not args.no_greedy,
                           truncated=cfg.eval.truncated, engine=engine, batch_prompts=cfg.eval.batch_prompts,
                           log=EvalLog(cfg.output_dir, spec, provenance(described)), resume=args.resume, stop=stop)
    finally:
        if engine is not None:
            engine.close()
    summary = {"prompts": len(rows), "samples_per_prompt": n, "temperature": args.temperature,
               "max_tokens": cfg.generation.max_tokens, "verifier": task.outcome,
               "truncated_scored_as": cfg.eval.truncated, "environment": cfg.grpo.environment or None,
               "model": cfg.model.name_or_path, "seconds": round(res.seconds, 1),
               **{k: round(v, 4) for k, v in res.metrics.items()}}
    tmp = os.path.join(cfg.output_dir, "summary.json.tmp")
    with open(tmp, "w") as f:
        json.dump(dict(summary, config=dataclasses.asdict(cfg)), f, indent=1, default=str)
    os.replace(tmp, os.path.join(cfg.output_dir, "summary.json"))
    print(json.dumps(summary))
    m = res.metrics
    if "parseable" in m:
        head = f"greedy {m['greedy']:.3f} +- {m['greedy_se']:.3f}; " if "greedy" in m else ""
        print(f"{head}parseable {m['parseable']:.3f} +- {m['parseable_se']:.3f}, cut at {cfg.generation.max_tokens} "
              f"tokens {m['cut']:.3f} +- {m['cut_se']:.3f}, accuracy among parseable "
              + (f"{m['accuracy_parseable']:.3f} +- {m['accuracy_parseable_se']:.3f}" if "accuracy_parseable" in m
                 else "- (none parseable)"), file=sys.stderr)
    if m.get("cut") == 1.0:
        print(all_cut_line(cfg, task), file=sys.stderr)
    print(f"samples with their verdicts: {cfg.output_dir}/archive.jsonl (reasoning-rl reverify {cfg.output_dir})",
          file=sys.stderr)
    return 0


def all_cut_line(cfg, task) -> str:
    """What an evaluation whose every completion was cut at the token limit says: nothing ended, and the likely why."""
    line = f"note: every completion was cut at generation.max_tokens={cfg.generation.max_tokens} (none ended): "
    if task.plain and not task.stops(cfg.generation.stop):
        return line + (f"{cfg.model.name_or_path} has no chat template and no stop string is set, so nothing ends "
                       "its answer; set generation.stop (e.g. '[\"\\nQuestion:\"]') or tasks.plain_template")
    if task.plain:
        return line + (f"{cfg.model.name_or_path} has no chat template and its completions never reached "
                       f"generation.stop {list(task.stops(cfg.generation.stop))!r}; raise generation.max_tokens, "
                       "or train it to answer in this form (sft)")
    return line + "raise generation.max_tokens, or check that the model ends its turn (its EOS)"


def announce_kernels(cfg, model, rows: int, log=lambda m: print(m, file=sys.stderr)) -> None:
    """generation.cpu_decode=auto's choice for this model, measured (or read from the cache) now and said in one line,
    before a progress bar whose first batch would otherwise hold the measurement silently."""
    from ..rollout import cpu_kernels

    if cfg.generation.cpu_decode == "auto" and cfg.model.device in ("auto", "cpu"):
        log("cpu decode kernels: choosing for this machine and model (auto; a few decode steps when not cached)")
    note = cpu_kernels.auto_choice(cfg.generation.cpu_decode, model, rows)
    if note:
        log(note)


def cmd_task_check(args) -> int:
    cfg = load_config(args)
    from ..task.check import check_report, format_report

    task = load_task(cfg, log=lambda *_: None)
    from ..models.load import load_tokenizer

    report = check_report(cfg, task, load_tokenizer(cfg), probe=args.probe)
    print(json.dumps(report, indent=1, ensure_ascii=False) if args.json else format_report(report))
    return 0


def cmd_reverify(args) -> int:
    import os

    import verifiers

    from .reverify import format_table, reverify, write_report

    if not os.path.isdir(args.run_dir):
        raise UserError(f"reverify: {args.run_dir!r} is not a directory (a training run's)")
    try:
        options = json.loads(args.options) if args.options else {}
    except json.JSONDecodeError as e:
        raise UserError(f"--options: not valid JSON ({e.msg}): {args.options!r}") from None
    if not isinstance(options, dict):
        raise UserError(f"--options: must be a JSON object, got {args.options!r}")
    with verifiers.VerifierPool(num_workers=args.workers) as pool:
        rep = reverify(args.run_dir, args.verifier, options, pool=pool)
    out = args.output or os.path.join(args.run_dir, "reverify")
    write_report(rep, out)
    print(format_table(rep))
    print(f"written: {out}/flips.jsonl, summary.json, reward.png")
    return 0
