"""The recipe's stages: each trains from the model the stage before it left and saves its own in `FOLDER/final`.

    STAGES[name](ctx) -> Trained      sft, grpo, ppo, distill, dpo, rest
    score(ctx, model, tok) -> dict    the held-out greedy scores of a stage's model (FOLDER/eval, resumable)

Each stage is the command a user would run, called in-process with the recipe's config and three keys set: the model
it starts from, its run folder, and what it reads of an earlier stage (the sft stage's difficulty prior). Each picks up
what an earlier invocation left in its folder: a finished model is not trained again; a checkpoint is resumed (the
trainers' own `--resume`; `sft`'s checkpoint); an evaluation goes on from its last finished batch. Every stage's
seconds are its wall and CPU seconds of training, the model's load included, evaluation not.

    sft      the task's gold solutions (tasks.target_col as tasks.target_format writes them); also writes
             difficulty.jsonl, its model's loss on the first recipe.difficulty_rows gold solutions
    grpo     GRPO under the outcome verifier (the grpo section; its difficulty prior from the sft stage)
    ppo      PPO, critic and GAE (the ppo section)
    distill  on-policy distillation from recipe.teacher (the distill section)
    dpo      DPO on pairs of the start model's own verified samples (passed against failed, same prompt)
    rest     SFT on the start model's own verified samples (ReST-EM: sample, keep what passed, fine-tune)

Not here: the order, the record and the summary (run.py); the trainers themselves (trainers/).
"""
from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..config.knobs import from_dict, to_dict
from ..config.sections import Config
from ..errors import UserError
from ..task.task import Task

DIFFICULTY = "difficulty.jsonl"


@dataclass
class Ctx:
    """What a stage gets: the recipe's config, the model it starts from, its own folder, the folders of the stages
    before it (oldest first), the task (rendered with the start model's tokenizer) and where to log."""
    cfg: Config
    start: str
    folder: str
    earlier: list[str]
    task: Task
    log: Callable[[str], None] = print

    def config(self, **keys: Any) -> Config:
        """The recipe's config with the model this stage starts from, its run folder and `keys` (dotted names with
        "__" for ".", e.g. model__lora__r=0) set; validated as a command's config is."""
        data = to_dict(self.cfg)
        for key, value in {"model__name_or_path": self.start, "output_dir": self.folder, **keys}.items():
            node, parts = data, key.split("__")
            for p in parts[:-1]:
                node = node[p]
            node[parts[-1]] = value
        return from_dict(Config, data)

    def path(self, *parts: str) -> str:
        return os.path.join(self.folder, *parts)


@dataclass
class Trained:
    """A stage's model: its folder, and the model itself when this invocation trained it (else None: load it)."""
    final: str
    model: Any = None
    tok: Any = None
    seconds: float = 0.0  # wall seconds of this invocation's training
    cpu_seconds: float = 0.0
    notes: dict = field(default_factory=dict)


class _Clock:
    """Wall and CPU seconds of a stage's training (this process's CPU: every thread of it)."""

    def __enter__(self) -> "_Clock":
        self.t0, self.c0 = time.time(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.wall, self.cpu = time.time() - self.t0, time.process_time() - self.c0


def _lora_r(ctx: Ctx) -> dict:
    return {"model__lora__r": ctx.cfg.recipe.sft_lora_r}


def sft(ctx: Ctx) -> Trained:
    """SFT on the task's gold solutions (trainers/sft.py), then the difficulty prior of the RL stages."""
    from ..models.load import load_policy
    from ..models.lora import maybe_lora
    from ..trainers.sft import DONE, run_sft

    from ..data.gold_traces import gold_targets
    from ..models.load import load_tokenizer

    cfg, final = ctx.config(**_lora_r(ctx)), ctx.path("final")
    rows, summary = gold_targets(ctx.task, load_tokenizer(cfg), cfg.grpo)
    ctx.log(f"recipe: sft on {summary.line()}")
    out = Trained(final)
    if not os.path.isfile(os.path.join(final, DONE)):
        with _Clock() as clock:
            model, tok = load_policy(cfg, log=ctx.log)
            model = maybe_lora(model, cfg)
            resume = os.path.isfile(os.path.join(final, "sft_checkpoint.pt"))
            run_sft(cfg, model, tok, rows, final, resume=resume, log=ctx.log)
        out = Trained(final, model, tok, clock.wall, clock.cpu)
    n = ctx.cfg.recipe.difficulty_rows
    if n and not os.path.isfile(ctx.path(DIFFICULTY)):
        model, tok = (out.model, out.tok) if out.model is not None else _load(ctx, final)
        write_difficulty(model, tok, rows[:n], ctx.path(DIFFICULTY))
        ctx.log(f"recipe: the sft model's loss on {min(n, len(rows))} gold solutions -> {ctx.path(DIFFICULTY)} (the "
                "RL stages' difficulty prior)")
        out = Trained(final, model, tok, out.seconds, out.cpu_seconds)
    return out


def write_difficulty(model, tok, rows: list[dict], path: str) -> None:
    """Each row's difficulty for easy_first: the model's mean loss per token on its gold solution."""
    from ..models.sft import target_nll

    nll = target_nll(model, tok, [r["prompt"] for r in rows],
                     [(r["ids"], r["loss_mask"]) if "ids" in r else r["completion"] for r in rows])
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        for r, v in zip(rows, nll):
            f.write(json.dumps({"prompt_id": r["prompt_id"], "difficulty": round(v, 5)}) + "\n")
    os.replace(tmp, path)


def _prior(ctx: Ctx) -> dict:
    """The difficulty prior the nearest earlier stage wrote, for easy_first (none: the task's own)."""
    found = next((os.path.join(f, DIFFICULTY) for f in reversed(ctx.earlier)
                  if os.path.isfile(os.path.join(f, DIFFICULTY))), "")
    return {"tasks__difficulty_file": found} if found else {}


def _rl(ctx: Ctx, algorithm: str, train, **keys) -> Trained:
    """An RL stage: the trainer's own run in the stage folder, resumed from its checkpoint where one is there; its
    periodic evaluations off (the recipe scores the stage after it)."""
    from ..trainers.checkpoint import NAME

    final = ctx.path("final")
    if os.path.isfile(ctx.path("finished.json")):
        return Trained(final)
    quiet = {f"{algorithm}__eval_every": 0, f"{algorithm}__eval_at_start": False, f"{algorithm}__eval_at_end": False}
    cfg = ctx.config(**quiet, **_prior(ctx), **keys)
    resume = os.path.isfile(os.path.join(ctx.folder, NAME, "state.pt"))
    with _Clock() as clock:
        _, model, tok = train(cfg, log=ctx.log, resume=resume)
    return Trained(final, model, tok, clock.wall, clock.cpu)


def grpo(ctx: Ctx) -> Trained:
    from ..trainers.grpo import train_grpo

    return _rl(ctx, "grpo", train_grpo)


def ppo(ctx: Ctx) -> Trained:
    from ..trainers.ppo import train_ppo

    return _rl(ctx, "ppo", train_ppo)


def distill(ctx: Ctx) -> Trained:
    from ..trainers.distill import train_distill

    teacher = ctx.cfg.recipe.teacher or ctx.cfg.distill.teacher
    return _rl(ctx, "distill", train_distill, distill__teacher=teacher)


def _own_samples(ctx: Ctx, model, tok, prompts: int, n: int) -> list:
    """The start model's verified groups on the first `prompts` train rows, `n` samples each at the configured
    temperature (episodes with grpo.environment where it names one); kept in samples.jsonl, so a resumed stage
    samples nothing again."""
    from ..data.archive import read_archive_rounds, write_groups
    from ..data.curate import sample_verified
    from ..rollout import SamplingConfig

    path = ctx.path("samples.jsonl")
    if os.path.isfile(path):
        return read_archive_rounds(path).get(0, [])
    with _engine(ctx.cfg, model, tok) as engine:
        groups = sample_verified(model, tok, ctx.task, ctx.task.train[:prompts], n,
                                 SamplingConfig.of(ctx.cfg.generation, seed=ctx.cfg.seed,
                                                   stop=ctx.task.stops(ctx.cfg.generation.stop)), log=lambda *_: None,
                                 engine=engine)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        write_groups(f, groups, step=0, sampled={"model": ctx.start, "temperature": ctx.cfg.generation.temperature,
                                                 "top_p": ctx.cfg.generation.top_p, "seed": ctx.cfg.seed})
    os.replace(tmp, path)
    return groups


def rest(ctx: Ctx) -> Trained:
    """ReST-EM: the start model samples the train prompts, its passing samples are the targets of an SFT run."""
    from ..models.load import load_policy
    from ..models.lora import maybe_lora
    from ..trainers.sft import DONE, run_sft

    cfg, final, r = ctx.config(**_lora_r(ctx)), ctx.path("final"), ctx.cfg.recipe
    if os.path.isfile(os.path.join(final, DONE)):
        return Trained(final)
    with _Clock() as clock:
        model, tok = load_policy(cfg, log=ctx.log)
        groups = _own_samples(ctx, model, tok, r.rest_prompts, r.rest_samples)
        rows, seen = [], set()
        for g in groups:
            for s in g.samples:
                if s.outcome(ctx.task.outcome) and (g.prompt, s.token_ids) not in seen:
                    seen.add((g.prompt, s.token_ids))  # an episode trains on its ids, the tool's output masked off
                    rows.append({"prompt": g.prompt, **({"ids": list(s.token_ids), "loss_mask": list(s.loss_mask)}
                                                        if s.turns else {"completion": s.text})})
        if not rows:
            raise UserError(f"recipe stage rest: none of the {len(groups)} prompts' {r.rest_samples} samples passed "
                            f"{ctx.task.outcome!r}; raise recipe.rest_samples or recipe.rest_prompts, or run an sft "
                            "stage first")
        ctx.log(f"recipe: rest trains on {len(rows)} passing samples of {len(groups)} prompts")
        model = maybe_lora(model, cfg)
        run_sft(cfg, model, tok, rows, final, resume=os.path.isfile(os.path.join(final, "sft_checkpoint.pt")),
                log=ctx.log)
    return Trained(final, model, tok, clock.wall, clock.cpu, {"targets": len(rows)})


def dpo(ctx: Ctx) -> Trained:
    """DPO on pairs of the start model's own verified samples (the dpo section; our loop)."""
    import verifiers

    from ..data.pairs import PairConfig, build_pairs
    from ..models.load import load_policy
    from ..models.lora import maybe_lora, save_final
    from ..trainers.dpo import train_dpo_ours

    cfg, r = ctx.config(), ctx.cfg.recipe
    with _Clock() as clock:
        model, tok = load_policy(cfg, log=ctx.log)
        groups = _own_samples(ctx, model, tok, r.dpo_prompts, cfg.dpo.group_size)
        pairs, summary = build_pairs(groups, ctx.task.outcome, PairConfig(), policy=ctx.start,
                                     verifier_version=verifiers.get(ctx.task.outcome).version)
        if not pairs:
            raise UserError(f"recipe stage dpo: no prompt of {len(groups)} had both a pass and a fail among its "
                            f"{cfg.dpo.group_size} samples; raise recipe.dpo_prompts or dpo.group_size")
        ctx.log(f"recipe: dpo on {len(pairs)} pairs ({json.dumps(summary)})")
        model = maybe_lora(model, cfg)
        train_dpo_ours(cfg, model, tok, [p.as_row() for p in pairs], log=ctx.log)
        save_final(ctx.folder, model, tok, merged=cfg.model.lora.save_merged, cfg=cfg)
    return Trained(ctx.path("final"), model, tok, clock.wall, clock.cpu, {"pairs": len(pairs)})


STAGES: dict[str, Callable[[Ctx], Trained]] = {"sft": sft, "grpo": grpo, "ppo": ppo, "distill": distill, "dpo": dpo,
                                               "rest": rest}


def _load(ctx: Ctx, final: str):
    from ..models.load import load_policy

    return load_policy(ctx.config(model__name_or_path=final), log=ctx.log)


@contextlib.contextmanager
def _engine(cfg: Config, model, tok):
    """The episode engine of grpo.environment (every sample an episode with the tool the run trains with), closed
    after; None (single completions) without one."""
    if not cfg.grpo.environment:
        yield None
        return
    from ..rollout.episodes import EpisodeEngine

    engine = EpisodeEngine.of(cfg.grpo, model, tok)
    try:
        yield engine
    finally:
        engine.close()


def score(ctx: Ctx, trained: Trained | None) -> dict:
    """The held-out greedy scores of a stage's model (the start model for `trained` None), every sample and verdict
    in FOLDER/eval/archive.jsonl; an evaluation stopped halfway goes on from its last finished batch. Returns
    eval/summary.json's metrics."""
    from ..data.archive import provenance
    from ..eval.sampled import PROGRESS, EvalLog, run_eval
    from ..models.lora import is_lora
    from ..interrupts import stop_requests
    from ..rollout import SamplingConfig

    out = ctx.path("eval")
    summary = os.path.join(out, "summary.json")
    if os.path.isfile(summary):
        with open(summary) as f:
            return json.load(f)
    final = trained.final if trained is not None else ctx.start
    model, tok = (trained.model, trained.tok) if trained is not None and trained.model is not None else \
        _load(ctx, final)
    if is_lora(model):  # saved already: decode on the merged weights (no adapter products, the plain model's kernels)
        model = model.merge_and_unload()
    cfg, size = ctx.cfg, ctx.cfg.recipe.eval_size
    rows = ctx.task.rows("test")[:size] if size else ctx.task.rows("test")
    os.makedirs(out, exist_ok=True)
    spec = {"rows": [r["prompt_id"] for r in rows], "n": 1, "temperature": 0.0, "greedy": True,
            "batch_prompts": cfg.eval.batch_prompts, "model": final, "max_tokens": cfg.generation.max_tokens,
            "seed": cfg.seed}
    described = ctx.task.describe(ctx.task.outcome_reward())
    from ..rollout import cpu_kernels

    note = cpu_kernels.auto_choice(cfg.generation.cpu_decode, model, min(128, cfg.eval.batch_prompts))
    if note:
        ctx.log(note)
    greedy = SamplingConfig.of(cfg.generation, temperature=0.0, seed=cfg.seed, stop=ctx.task.stops(cfg.generation.stop))
    spec["environment"] = cfg.grpo.environment
    with stop_requests(ctx.log, after="the evaluation's batch in progress (the finished ones are kept)") as stop, \
            _engine(cfg, model, tok) as engine:
        res = run_eval(model, tok, ctx.task, rows, 1, greedy, greedy=True, truncated=cfg.eval.truncated,
                       batch_prompts=cfg.eval.batch_prompts, log=EvalLog(out, spec, provenance(described)),
                       resume=os.path.isfile(os.path.join(out, PROGRESS)), stop=stop, engine=engine)
    metrics = {"prompts": len(rows), "model": final, "seconds": round(res.seconds, 1),
               **{k: round(v, 4) for k, v in res.metrics.items()}}
    tmp = summary + ".tmp"
    with open(tmp, "w") as f:
        json.dump(metrics, f, indent=1)
    os.replace(tmp, summary)
    return metrics
