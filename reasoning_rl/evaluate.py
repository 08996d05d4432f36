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


def greedy_complete(model, tokenizer, prompts: list[str], max_new_tokens: int = 8, batch_size: int = 128) -> list[str]:
    import torch

    out: list[str] = []
    tokenizer.padding_side = "left"
    for i in range(0, len(prompts), batch_size):
        enc = tokenizer(prompts[i:i + batch_size], return_tensors="pt", padding=True)
        with torch.no_grad():
            gen = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                                 pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
        out.extend(tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True))
    return out


def greedy_accuracy(model, tokenizer, rows: list[dict], max_new_tokens: int = 8) -> float:
    if not rows:
        raise ValueError("greedy_accuracy: no rows to evaluate")
    completions = greedy_complete(model, tokenizer, [r["prompt"] for r in rows], max_new_tokens)
    hits = sum(last_int(c) == str(r["answer"]).strip() for c, r in zip(completions, rows))
    return hits / len(rows)
