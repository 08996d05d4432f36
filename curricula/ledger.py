"""A per-prompt pass-rate ledger in SQLite: attempts, passes, EMA pass rate, streak, last step, retired.

Updated from every verified group (the outcome verifier's pass/fail; masked samples are
not attempts). One transaction per update, so a process killed mid-write leaves the
ledger as it was before that update; WAL mode and a busy timeout let several processes
(trainer ranks, the pair builder, a curate run) read and write the same file.

Standard library only (`sqlite3`).
"""
from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass
from typing import Iterable, Sequence

from reasoning_rl.types import Group

_SCHEMA = """
CREATE TABLE IF NOT EXISTS prompts (
    prompt_id  TEXT PRIMARY KEY,
    attempts   INTEGER NOT NULL DEFAULT 0,
    passes     INTEGER NOT NULL DEFAULT 0,
    ema        REAL,
    streak     INTEGER NOT NULL DEFAULT 0,   -- consecutive groups with every scored sample passing
    last_step  INTEGER NOT NULL DEFAULT -1,
    retired    INTEGER NOT NULL DEFAULT 0,
    retired_at INTEGER NOT NULL DEFAULT -1,
    updated    REAL NOT NULL DEFAULT 0
);
"""


@dataclass(frozen=True)
class Entry:
    prompt_id: str
    attempts: int
    passes: int
    ema: float | None
    streak: int
    last_step: int
    retired: bool
    retired_at: int

    @property
    def pass_rate(self) -> float | None:
        return self.passes / self.attempts if self.attempts else None


_SELECT = "SELECT prompt_id, attempts, passes, ema, streak, last_step, retired, retired_at FROM prompts"


def _entry(r) -> Entry:
    return Entry(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6]), r[7])


def read_entries(path: str | os.PathLike[str]) -> dict[str, Entry]:
    """A ledger's entries, opened read-only (a report of a run in progress must not write to its ledger).
    sqlite3.Error when the file is not a ledger."""
    conn = sqlite3.connect(f"file:{os.fspath(path)}?mode=ro", uri=True, timeout=5.0)
    try:
        return {r[0]: _entry(r) for r in conn.execute(_SELECT)}
    finally:
        conn.close()


class Ledger:
    """ema_alpha: weight of the newest group's pass rate in the EMA (0.3 follows a policy that moves)."""

    def __init__(self, path: str | os.PathLike[str], ema_alpha: float = 0.3, timeout: float = 30.0) -> None:
        if not 0 < ema_alpha <= 1:
            raise ValueError(f"Ledger.ema_alpha must be in (0, 1], got {ema_alpha!r}")
        self.path = os.fspath(path)
        self.ema_alpha = ema_alpha
        d = os.path.dirname(self.path)
        if d:
            os.makedirs(d, exist_ok=True)
        self.conn = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute(_SCHEMA)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, groups: Iterable[Group], outcome: str, step: int, retire_after: int | None = None) -> None:
        """Add each group's scored outcomes; retire a prompt after `retire_after` all-pass groups in a row."""
        rows = []
        for g in groups:
            scored = [o for o in g.outcomes(outcome) if o is not None]
            if scored:
                rows.append((g.prompt_id, len(scored), sum(scored), sum(scored) / len(scored), all(scored)))
        if not rows:
            return
        a = self.ema_alpha
        now = time.time()
        with self.conn:  # BEGIN ... COMMIT, rolled back if anything raises (or the process dies)
            self.conn.execute("BEGIN IMMEDIATE")
            for pid, n, k, rate, solved in rows:
                self.conn.execute(
                    """INSERT INTO prompts (prompt_id, attempts, passes, ema, streak, last_step, updated)
                       VALUES (?, ?, ?, ?, ?, ?, ?)
                       ON CONFLICT(prompt_id) DO UPDATE SET
                         attempts = attempts + excluded.attempts,
                         passes = passes + excluded.passes,
                         ema = CASE WHEN ema IS NULL THEN excluded.ema ELSE (1 - ?) * ema + ? * excluded.ema END,
                         streak = CASE WHEN excluded.streak = 1 THEN streak + 1 ELSE 0 END,
                         last_step = MAX(last_step, excluded.last_step),
                         updated = excluded.updated""",
                    (pid, n, k, rate, 1 if solved else 0, step, now, a, a))
                if retire_after:
                    self.conn.execute("UPDATE prompts SET retired = 1, retired_at = ? "
                                      "WHERE prompt_id = ? AND retired = 0 AND streak >= ?", (step, pid, retire_after))
            self.conn.execute("COMMIT")

    def revive(self, step: int, after_steps: int) -> int:
        """Un-retire prompts retired at least `after_steps` steps ago (their streak restarts). Returns how many."""
        with self.conn:
            cur = self.conn.execute("UPDATE prompts SET retired = 0, retired_at = -1, streak = 0 "
                                    "WHERE retired = 1 AND retired_at <= ?", (step - after_steps,))
            return cur.rowcount

    def get(self, prompt_id: str) -> Entry | None:
        r = self.conn.execute(_SELECT + " WHERE prompt_id = ?", (prompt_id,)).fetchone()
        return None if r is None else _entry(r)

    def entries(self, prompt_ids: Sequence[str] | None = None) -> dict[str, Entry]:
        out = {r[0]: _entry(r) for r in self.conn.execute(_SELECT)}
        if prompt_ids is not None:
            wanted = set(prompt_ids)
            out = {k: v for k, v in out.items() if k in wanted}
        return out

    def retired_count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM prompts WHERE retired = 1").fetchone()[0]
