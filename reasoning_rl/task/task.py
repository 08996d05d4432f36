"""A task: where rows come from, how a row becomes a prompt, its reference, its reward, how it is scored.

    task = Task.from_config(cfg.tasks)       rows read and checked; no model, no tokenizer (fails fast)
    task.render(tokenizer)                   every row's `prompt` as the model will see it; over-long rows dropped
    task.reward(rl)                          the verifiers.Reward of the task's terms (one is the outcome)
    task.checked_text(row, completion)       what the outcome verifier reads (a code body: raw prompt + it)

Every command takes its data through one `Task`: `train grpo|ppo|dpo`, `curate`, `pairs`, `eval`,
the trainers' held-out evaluation and `task check`. The same verifier decides correctness in
training and in evaluation (nanochat's task files own both; so does this object). A task never generates:
held-out scores are reasoning_rl/eval/held_out.py's, which call `verify` on what the model wrote.

A row, once normalised, is a dict: `prompt_id`, `prompt` (rendered), `raw` (the user's prompt: text
or chat messages), `reference`, `refs` (references of terms that read another column), `task` (the
family, or the data source) and `target` (a gold completion for SFT, when the task has one); the
embedded tasks' rows also keep their own columns (`answer`, `tests`).

Not here: reading files (task/sources.py), the presets' columns (task/presets.py), the embedded
procedural generators (task/embedded/).
"""
from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import verifiers
from verifiers.prm import prm_term

from ..config.sections import GRPOConfig, RLConfig, TaskConfig
from ..errors import UserError
from . import plain
from .presets import DATA_SOURCES, PRESETS, Preset
from .solutions import EXTRACTORS, boxed_target
from .sources import column, has_column as _has, load_split_rows, split_by_hash
from ..types import Group, Sample, Status, Verdict

_EMPTY = (None, "", [], {})


def _is_messages(x: Any) -> bool:
    return isinstance(x, list) and bool(x) and all(isinstance(m, dict) and "role" in m and "content" in m for m in x)


@dataclass
class Task:
    """The rows of both splits (normalised) and what the config says about prompts, references and the reward."""
    cfg: TaskConfig
    train: list[dict]
    test: list[dict]
    outcome: str
    checked: str  # "completion" | "prompt+completion"
    source: str  # for messages: the file, the Hub name, or "the embedded tasks"
    dropped: Counter = field(default_factory=Counter)  # reason -> rows dropped
    chat: bool = False  # set by render()
    plain: str = ""  # set by render(): the plain template prompts are in (a model with no chat template), or ""

    # ------------------------------------------------------------ building
    @classmethod
    def from_config(cls, tc: TaskConfig) -> "Task":
        """Read both splits and normalise every row; a bad column, row or split is a UserError naming it."""
        preset = PRESETS[tc.preset]
        if not tc.source:
            return cls._embedded(tc)
        outcome = outcome_of(tc)
        _check_verifiers(tc, outcome)
        task = cls(tc, [], [], outcome, tc.checked or preset.checked, tc.source)
        raw_train = load_split_rows(tc.source, tc.hub_config, tc.train_split)
        if tc.test_split:
            raw_test = load_split_rows(tc.source, tc.hub_config, tc.test_split)
        else:
            raw_train, raw_test = split_by_hash(raw_train, lambda r: repr(_prompt_of(r, tc, preset)),
                                                tc.heldout_percent)
        task.train = task._normalise(raw_train, preset, tc.train_split)
        # an empty hash share is an error only where the held-out rows are used (Task.rows)
        task.test = task._normalise(raw_test, preset, tc.test_split or "held-out") if raw_test or tc.test_split else []
        return task

    @classmethod
    def _embedded(cls, tc: TaskConfig) -> "Task":
        from .embedded.arithmetic import make_rows

        code = tc.kind == "code"
        outcome = outcome_of(tc)
        _check_verifiers(tc, outcome)
        task = cls(tc, [], [], outcome, tc.checked or ("prompt+completion" if code else "completion"),
                   "the embedded tasks")
        train, test = make_rows(tc)
        for r in train + test:
            r.update(raw=r["prompt"], reference=r["tests" if code else "answer"], target=r["answer"],
                     refs=_term_refs(r, tc, "the embedded tasks", 0))
        task.train, task.test = train, test
        return task

    def _normalise(self, rows: list[Any], preset: Preset, split: str) -> list[dict]:
        tc = self.cfg
        where = f"{self.source!r} split {split!r}"
        if not rows:
            raise UserError(f"tasks.source: {where} has no rows")
        prompt_col = tc.prompt_col or preset.prompt_col
        id_col = tc.id_col or preset.id_col or next((c for c in ("prompt_id", "id") if c in rows[0]), "")
        target_col = "" if tc.target_col == "none" else (tc.target_col or preset.target_col)
        out, seen = [], set()
        for i, r in enumerate(rows):
            if not isinstance(r, dict):
                raise UserError(f"tasks.source: {where} row {i} is not an object: {str(r)[:60]!r}")
            try:
                raw = column(r, prompt_col)
            except KeyError:
                raise UserError(f"tasks.prompt_col: {where} row {i} has no column {prompt_col!r} "
                                f"(columns: {sorted(r)})") from None
            if not (isinstance(raw, str) and raw.strip()) and not _is_messages(raw):
                raise UserError(f"tasks.prompt_col: {where} row {i} column {prompt_col!r} is neither text nor a list "
                                f"of {{role, content}} messages: {str(raw)[:60]!r}")
            if self.checked == "prompt+completion" and not isinstance(raw, str):
                raise UserError(f"tasks.checked: prompt+completion needs a text prompt, but {where} row {i} holds "
                                "chat messages; set tasks.checked=completion")
            ref = self._reference(r, preset, where, i)
            if ref in _EMPTY:
                self.dropped[f"{split}: empty reference"] += 1
                continue
            if self.outcome == "route" and _routing_col(tc):
                ref = {"verifier": self._route(r, preset, where, i), "reference": ref}
            pid = str(column(r, id_col)) if id_col and _has(r, id_col) else \
                "row-" + hashlib.sha256(repr(raw).encode()).hexdigest()[:12]
            if pid in seen:
                self.dropped[f"{split}: duplicate prompt"] += 1
                continue
            seen.add(pid)
            row = {"prompt_id": pid, "prompt": raw if isinstance(raw, str) else "", "raw": raw, "reference": ref,
                   "refs": _term_refs(r, tc, where, i), "task": str(r.get("data_source", tc.preset or "task")),
                   "columns": r}
            if target_col and _has(r, target_col):
                row["target"] = column(r, target_col)
            out.append(row)
        if not out:
            raise UserError(f"tasks.reference_col: {where}: no usable rows: all {len(rows)} have an empty reference")
        return out

    def _route(self, r: dict, preset: Preset, where: str, i: int) -> str:
        """The verifier a row's outcome column names (tasks.outcome_map, the known data sources, else the preset's)."""
        col = _routing_col(self.cfg)
        if not _has(r, col):
            raise UserError(f"tasks.outcome_col: {where} row {i} has no column {col!r} (columns: {sorted(r)})")
        value = str(column(r, col))
        name = self.cfg.outcome_map.get(value) or DATA_SOURCES.get(value) or preset.outcome
        try:
            verifiers.get(name)
        except UserError:
            raise UserError(f"tasks.outcome_map: {where} row {i}: {col} {value!r} maps to {name!r}, which is not a "
                            f"registered verifier") from None
        return name

    def _reference(self, r: dict, preset: Preset, where: str, i: int) -> Any:
        tc = self.cfg
        if tc.reference_col or not preset.reference_cols:
            options = ((tc.reference_col, tc.reference_extract or "none"),) if tc.reference_col else tuple(
                (c, tc.reference_extract or x) for c, x in preset.reference)
            for col, extract in options:
                if _has(r, col):
                    value = column(r, col)
                    if extract != "none":
                        if not isinstance(value, str):
                            raise UserError(f"tasks.reference_extract: {where} row {i} column {col!r} is not text "
                                            f"({type(value).__name__}); {extract} reads text")
                        return EXTRACTORS[extract](value)
                    return value
            cols = [c for c, _ in options]
            raise UserError(f"tasks.reference_col: {where} row {i} has no column {' or '.join(map(repr, cols))} "
                            f"(columns: {sorted(r)})")
        missing = [c for c in preset.reference_cols if c not in r]
        if len(missing) == len(preset.reference_cols):
            raise UserError(f"tasks.reference_col: {where} row {i} has none of the {tc.preset} test columns "
                            f"{list(preset.reference_cols)} (columns: {sorted(r)})")
        return {c: r[c] for c in preset.reference_cols if c in r and r[c] is not None}

    # ------------------------------------------------------------ prompts
    def render(self, tokenizer, tools: list | None = None) -> None:
        """Set every row's `prompt` to the text the model sees; drop rows over tasks.max_prompt_tokens (counted).
        `tools`: tool schemas the chat template shows in the prompt (a run whose environment has tools, in the chat
        format: environments.prompt_tools); kept on each row (`tools`) for the episodes' template check."""
        tc = self.cfg
        has_template = bool(getattr(tokenizer, "chat_template", None))
        if tc.chat_template == "on" and not has_template:
            raise UserError("tasks.chat_template: value 'on' but the tokenizer has no chat template")
        self.chat = tc.chat_template == "on" or (tc.chat_template == "auto" and has_template)
        self.plain = plain.plain_template(tc.plain_template, self.checked) if tc.chat_template == "auto" and \
            not has_template else ""
        for split in ("train", "test"):
            kept = []
            for i, row in enumerate(getattr(self, split)):
                row["prompt"] = self._render_one(tokenizer, row, f"{self.source!r} {split} row {i}", tools)
                if tc.max_prompt_tokens and len(tokenizer(row["prompt"])["input_ids"]) > tc.max_prompt_tokens:
                    self.dropped[f"{split}: prompt over {tc.max_prompt_tokens} tokens"] += 1
                    continue
                kept.append(row)
            if getattr(self, split) and not kept:
                raise UserError(f"tasks.max_prompt_tokens: every {split} prompt of {self.source!r} is longer than "
                                f"{tc.max_prompt_tokens} tokens")
            setattr(self, split, kept)

    def render_prompt(self, tokenizer, raw, where: str = "a prompt") -> str:
        """A prompt from outside the task's rows (text or chat messages) as the model sees the task's own: the same
        template, instruction, system prompt and chat template. After `render`."""
        return self._render_one(tokenizer, {"raw": raw}, where)

    def _render_one(self, tokenizer, row: dict, where: str, tools: list | None = None) -> str:
        tc, raw = self.cfg, row["raw"]
        if isinstance(raw, list):
            messages = [dict(m) for m in raw]
        else:
            text = raw
            if tc.template:
                try:
                    text = tc.template.format_map(row.get("columns", row))
                except (KeyError, IndexError, AttributeError, ValueError) as e:
                    raise UserError(f"tasks.template: {where}: cannot fill {tc.template!r} ({type(e).__name__}: "
                                    f"{e})") from None
            messages = [{"role": "user", "content": text}]
        if tc.instruction:
            last = next(m for m in reversed(messages) if m["role"] == "user") if any(
                m["role"] == "user" for m in messages) else messages[-1]
            last["content"] = f"{last['content'].rstrip()}\n{tc.instruction}"
        if tc.system_prompt and messages[0]["role"] != "system":
            messages.insert(0, {"role": "system", "content": tc.system_prompt})
        if self.chat:
            row["messages"] = messages  # the conversation so far (multi-turn episodes with tool_format chat extend it)
            if tools:
                row["tools"] = tools
                return tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
            return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        if isinstance(raw, list):
            raise UserError(f"tasks.chat_template: {where} is a list of chat messages but the tokenizer has no chat "
                            "template (or tasks.chat_template=off); give a text prompt column or a model with one")
        text = "\n\n".join(m["content"] for m in messages)
        return plain.fill(self.plain, text, where) if self.plain else text

    def stops(self, given: Sequence[str] = ()) -> tuple[str, ...]:
        """The stop strings of a run's completions: generation.stop (`given`) when set, else the plain template's cue
        (task/plain.py) where prompts are in one, else none. After `render`."""
        return tuple(given) or (plain.cue_stop(self.plain) if self.plain else ())

    def note_format(self, name: str, given: Sequence[str] = (), log: Callable[[str], None] = lambda s: print(
            s, file=sys.stderr)) -> None:
        """One line when the model `name` has no chat template: the plain template and where completions stop."""
        if self.plain:
            log(plain.note(name, self.plain, self.stops(given)))

    # ------------------------------------------------------------ reward and scoring
    def reward(self, rl: RLConfig | None = None) -> verifiers.Reward:
        """The task's terms; the default is the outcome (weight 1) + the kind's format rule at rl.format_weight,
        plus a PRM's step scores (weight 0) when grpo.prm_model is set."""
        fw = rl.format_weight if rl is not None else 0.0
        if self.cfg.reward:
            if fw:
                raise UserError(f"{rl.SECTION}.format_weight: value {fw} applies to the default reward only; with "
                                "tasks.reward given, add the format rule as a term")
            terms = [verifiers.Term(t.verifier, t.weight, dict(t.options)) for t in self.cfg.reward]
        else:
            fmt = "repetition" if self.outcome == "code" else "think_answer"
            terms = [verifiers.Term(self.outcome, 1.0), verifiers.Term(fmt, fw)]
        if isinstance(rl, GRPOConfig) and rl.prm_model:
            terms.append(prm_term(rl.prm_model))
        return verifiers.Reward(tuple(terms), outcome=self.outcome)

    def outcome_reward(self) -> verifiers.Reward:
        """The outcome term alone (with its configured options): what held-out scores and curation read."""
        term = next((t for t in self.cfg.reward if t.verifier == self.outcome), None)
        return verifiers.Reward.single(self.outcome, **(dict(term.options) if term else {}))

    def answer_key(self, completion: str) -> str | None:
        """What maj@k votes on: the outcome verifier's extracted answer where it has one (`answer_key`), else the
        checked text itself (a program)."""
        key = getattr(verifiers.get(self.outcome), "answer_key", None)
        return key(completion) if key else completion.strip()

    def checked_text(self, row: dict, completion: str) -> str:
        return checked_text(self.checked, row["raw"], completion)

    def verify(self, reward: verifiers.Reward, rows: Sequence[dict], completions: Sequence[str], pool=None,
               truncated: Sequence[bool] | None = None):
        """Every term's verdicts for (row, completion) pairs: what training and evaluation both call. `truncated`:
        which completions were cut at their token limit (the `math` verifiers then read no fallback answer)."""
        texts = [self.checked_text(r, c) for r, c in zip(rows, completions)]
        term_refs = {t.verifier: [r["refs"].get(t.verifier, r["reference"]) for r in rows] for t in reward.terms}
        return reward.verify(texts, [r["reference"] for r in rows], [r["prompt"] for r in rows], pool=pool,
                             term_references=term_refs, truncated=truncated)

    def verify_groups(self, reward: verifiers.Reward, groups: Sequence[Group], pool=None) -> list[Group]:
        """Every sample of every group with its verdicts (one concurrent batch through the pool); a sample whose
        environment failed (a tool's sandbox died: `Sample.error`) is masked ERROR under every term, never scored."""
        verdicts = iter(self.verify_samples(reward, [(g, s) for g in groups for s in g.samples], pool=pool))
        return [Group(g.prompt_id, g.prompt, g.row, [s.with_verdicts(_unless_failed(s, next(verdicts)))
                                                      for s in g.samples]) for g in groups]

    def verify_samples(self, reward: verifiers.Reward, flat: Sequence[tuple], pool=None):
        """`verify` for (group, sample) pairs: each sample against its group's row (the group's task + prompt)."""
        return self.verify(reward, [dict(g.row, prompt=g.prompt) for g, _ in flat], [s.text for _, s in flat],
                           pool=pool, truncated=[s.finish_reason == "length" for _, s in flat])

    def describe(self, reward: verifiers.Reward) -> dict:
        """What a run records in task.json: how samples were checked and by which verifiers (reverify reads it)."""
        return {"source": self.source, "outcome": self.outcome, "checked": self.checked,
                "terms": [{"verifier": t.verifier, "weight": t.weight, "options": dict(t.options),
                           "version": verifiers.get(t.verifier).version, "options_hash": options_hash(dict(t.options))}
                          for t in reward.terms]}

    def difficulty(self, rows: Sequence[dict]) -> dict[str, float]:
        """Each row's difficulty before any sampling (lower = easier; the easy_first sampler's prior): the
        tasks.difficulty_col value, or by tasks.difficulty the gold solution's steps (its non-empty lines but a final
        '#### N'), its characters, or the prompt's characters."""
        tc, out = self.cfg, {}
        if tc.difficulty_file:
            return _difficulty_file(tc.difficulty_file, rows)
        for i, r in enumerate(rows):
            if tc.difficulty_col:
                try:
                    out[r["prompt_id"]] = float(column(r.get("columns", r), tc.difficulty_col))
                except (KeyError, TypeError, ValueError):
                    raise UserError(f"tasks.difficulty_col: {self.source!r} row {i} has no number in column "
                                    f"{tc.difficulty_col!r}") from None
                continue
            how = tc.difficulty
            if how == "auto":
                how = "solution_steps" if any(r.get("target") for r in rows[:50]) else "prompt_length"
            solution = str(r.get("target") or "")
            if how == "solution_steps":
                steps = [x for x in solution.splitlines() if x.strip() and not x.strip().startswith("####")]
                out[r["prompt_id"]] = float(max(1, len(steps)))
            elif how == "solution_length":
                out[r["prompt_id"]] = float(len(solution))
            else:
                out[r["prompt_id"]] = float(len(str(r["raw"])))
        return out

    def sft_target(self, row: dict) -> str:
        """A row's gold completion as supervised training writes it (tasks.target_format)."""
        target = str(row["target"])
        return boxed_target(target) if self.cfg.target_format == "boxed" else target

    def gold_rows(self) -> list[dict]:
        """The train rows as supervised targets: each prompt (rendered) and its gold completion (`sft_target`). A
        task none of whose rows has one is a UserError naming tasks.target_col."""
        rows = [{"prompt": r["prompt"], "completion": self.sft_target(r), "prompt_id": r["prompt_id"]}
                for r in self.train if r.get("target") not in _EMPTY]
        if not rows:
            tc, col = self.cfg, PRESETS[self.cfg.preset].target_col
            raise UserError(f"tasks.target_col: no train row of {self.source!r} has a gold completion to train on "
                            f"(value {tc.target_col!r}; the preset {tc.preset!r} names "
                            + (f"{col!r}, which its rows lack)" if col else "none)"))
        return rows

    def rows(self, split: str) -> list[dict]:
        """"train", "test" (the held-out split) or "all" (both)."""
        if split == "test" and not self.test:
            raise UserError(f"tasks.heldout_percent: the held-out share ({self.cfg.heldout_percent}%, by hash) of "
                            f"{self.source!r} is empty; name a tasks.test_split, raise the share, or score every row "
                            "with --split all")
        return {"train": self.train, "test": self.test, "all": self.train + self.test}[split]

    def note_dropped(self, log: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
                     splits: Sequence[str] | None = None) -> None:
        """One line per reason rows were dropped; `splits`: only the drops of these splits (a command that reads
        one split is not told about the other's)."""
        for reason, n in sorted(self.dropped.items()):
            if splits is None or reason.split(":", 1)[0] in splits:
                log(f"note: dropped {n} rows of {self.source!r} ({reason})")


def _difficulty_file(path: str, rows: Sequence[dict]) -> dict[str, float]:
    """Each row's difficulty from a JSONL of {prompt_id, difficulty}; rows it does not name get the hardest value
    seen (drawn last by easy_first). A bad line is a UserError naming the file, the line and the field."""
    from .sources import read_rows

    known: dict[str, float] = {}
    for i, line in enumerate(read_rows(path)):
        try:
            known[str(line["prompt_id"])] = float(line["difficulty"])
        except (KeyError, TypeError, ValueError):
            raise UserError(f"tasks.difficulty_file: {path!r} line {i + 1} needs a prompt_id and a numeric "
                            f"difficulty, got {str(line)[:80]!r}") from None
    if not known:
        raise UserError(f"tasks.difficulty_file: {path!r} holds no rows")
    last = max(known.values())
    return {r["prompt_id"]: known.get(r["prompt_id"], last) for r in rows}


def options_hash(options: dict) -> str:
    """A short stable hash of a verifier call's options (sorted JSON; non-JSON values by their repr)."""
    return hashlib.sha256(json.dumps(options, sort_keys=True, default=repr).encode()).hexdigest()[:12]


def _unless_failed(s: Sample, verdicts: dict) -> dict:
    if not s.error:
        return verdicts
    return {k: Verdict.masked_as(Status.ERROR, f"environment failed: {s.error}"[:300]) for k in verdicts}


def checked_text(checked: str, raw: str, completion: str) -> str:
    """What the outcome verifier reads: the completion, or for "prompt+completion" (a code body completing a
    signature) the raw prompt followed by it. Training, evaluation and `reverify` all read it through here."""
    return raw + completion if checked == "prompt+completion" else completion


def outcome_of(tc: TaskConfig) -> str:
    """The outcome verifier's name: tasks.outcome, else the first reward term, else the preset's (a source) or the
    embedded kind's (code for kind=code, else math)."""
    if tc.outcome:
        return tc.outcome
    if tc.reward:
        return tc.reward[0].verifier
    if tc.source and _routing_col(tc):
        return "route"  # each row's own verifier, named by its outcome column
    if tc.source:
        return PRESETS[tc.preset].outcome
    return "code" if tc.kind == "code" else "math"


def _routing_col(tc: TaskConfig) -> str:
    col = tc.outcome_col or PRESETS[tc.preset].outcome_col
    return "" if col == "none" else col


def _prompt_of(r: Any, tc: TaskConfig, preset: Preset) -> Any:
    col = tc.prompt_col or preset.prompt_col
    return column(r, col) if isinstance(r, dict) and _has(r, col) else r


def _term_refs(r: dict, tc: TaskConfig, where: str, i: int) -> dict:
    refs = {}
    for t in tc.reward:
        if t.reference_col:
            if not _has(r, t.reference_col):
                raise UserError(f"tasks.reward.{t.verifier}.reference_col: {where} row {i} has no column "
                                f"{t.reference_col!r} (columns: {sorted(r)})")
            refs[t.verifier] = column(r, t.reference_col)
    return refs


def _check_verifiers(tc: TaskConfig, outcome: str) -> None:
    """Every named verifier exists (plugins included): an unknown name is a UserError listing the valid ones."""
    for name in [outcome] + [t.verifier for t in tc.reward]:
        verifiers.get(name)
    if tc.reward and outcome not in [t.verifier for t in tc.reward]:
        raise UserError(f"tasks.outcome: value {outcome!r} is not one of the reward terms "
                        f"{[t.verifier for t in tc.reward]}")
