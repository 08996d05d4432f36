"""Held-out accuracy of a policy on prompt/answer rows, by greedy decoding.

`greedy_accuracy` is what `reasoning-rl sft` prints. The answer check here is integer
equality of the completion's last number with the gold answer: the procedural tasks
have integer answers. (`reasoning-rl eval` with pass@k / maj@k and any verifier builds
on the rollout engines.)
"""
from __future__ import annotations

import re

_INT = re.compile(r"-?\d+")


def last_int(text: str) -> str | None:
    found = _INT.findall(text)
    return found[-1] if found else None


def greedy_complete(model, tokenizer, prompts: list[str], max_new_tokens: int = 32, batch_size: int = 128) -> list[str]:
    """Greedy completions (the rollout engine's decode loop: finished rows leave the batch), EOS not included."""
    from .rollout import decode

    out: list[str] = []
    tokenizer.padding_side = "left"
    was_training = model.training
    model.eval()
    try:
        for i in range(0, len(prompts), batch_size):
            enc = tokenizer(prompts[i:i + batch_size], return_tensors="pt", padding=True).to(model.device)
            ids, _, lengths = decode.sample(model, enc["input_ids"], enc["attention_mask"], max_new_tokens,
                                            tokenizer.eos_token_id, temperature=0.0)
            out.extend(tokenizer.decode(row[:n], skip_special_tokens=True)
                       for row, n in zip(ids.tolist(), lengths.tolist()))
    finally:
        model.train(was_training)
    return out


def greedy_accuracy(model, tokenizer, rows: list[dict], max_new_tokens: int = 32) -> float:
    if not rows:
        raise ValueError("greedy_accuracy: no rows to evaluate")
    completions = greedy_complete(model, tokenizer, [r["prompt"] for r in rows], max_new_tokens)
    hits = sum(last_int(c) == str(r["answer"]).strip() for c, r in zip(completions, rows))
    return hits / len(rows)


def greedy_pass_rate(model, tokenizer, rows: list[dict], pool=None, max_new_tokens: int = 64) -> float:
    """Share of rows whose greedy program (prompt + completion) passes all its hidden tests (`code` verifier).
    Masked verdicts (a sandbox failure) count as not passed and are reported by the pool's metrics."""
    import verifiers

    if not rows:
        raise ValueError("greedy_pass_rate: no rows to evaluate")
    completions = greedy_complete(model, tokenizer, [r["prompt"] for r in rows], max_new_tokens)
    pool = pool or verifiers.default_pool()
    verdicts = pool.verify_batch("code", [r["prompt"] + c for r, c in zip(rows, completions)], [r["tests"] for r in rows])
    return sum(v.status.value == "correct" for v in verdicts) / len(rows)


def task_accuracy(model, tokenizer, rows: list[dict], pool=None, max_new_tokens: int = 32) -> float:
    """Greedy held-out score for either task kind: pass rate for code rows, answer accuracy otherwise."""
    if rows and "tests" in rows[0]:
        return greedy_pass_rate(model, tokenizer, rows, pool, max_new_tokens)
    return greedy_accuracy(model, tokenizer, rows, max_new_tokens)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c passed (Chen et al. 2021): 1 - C(n-c, k) / C(n, k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k: need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    prob_all_fail = 1.0
    for i in range(n - c + 1, n + 1):  # prod_{i} (1 - k / i), numerically stable
        prob_all_fail *= 1.0 - k / i
    return 1.0 - prob_all_fail


def majority_correct(answers: list[str | None], passed: list[bool | None]) -> bool:
    """maj@k: is the most common extracted answer (ties: the first to reach the top count) a passing one?"""
    counts: dict[str, int] = {}
    for a in answers:
        if a is not None:
            counts[a] = counts.get(a, 0) + 1
    if not counts:
        return False
    top = max(counts.values())
    winner = next(a for a in answers if a is not None and counts[a] == top)
    return any(p for a, p in zip(answers, passed) if a == winner)


def evaluate_sampled(groups, outcome: str, ks: tuple[int, ...]) -> dict[str, float]:
    """pass@1, pass@k (unbiased) and maj@k over verified groups; masked samples are left out.
    maj@k votes on the extracted final answer (math) or on the program text itself (code)."""
    from verifiers.math_extract import extract_answer

    answer = (lambda s: s.text.strip()) if outcome == "code" else (lambda s: extract_answer(s.text)[0])  # noqa: E731

    out: dict[str, list[float]] = {}
    for g in groups:
        scored = [(s, s.outcome(outcome)) for s in g.samples if s.outcome(outcome) is not None]
        n, c = len(scored), sum(o for _, o in scored)
        if n == 0:
            continue
        out.setdefault("pass@1", []).append(c / n)
        for k in ks:
            if k <= n:
                out.setdefault(f"pass@{k}", []).append(pass_at_k(n, c, k))
                head = scored[:k]
                out.setdefault(f"maj@{k}", []).append(float(majority_correct(
                    [answer(s) for s, _ in head], [o for _, o in head])))
    return {k: sum(v) / len(v) for k, v in out.items()}
