"""Greedy decoding of a batch of prompts: what held-out evaluation generates.

    greedy_decode(model, tok, prompts, max_new_tokens) -> (texts, cut)   EOS not included; cut: no end of turn
    greedy_complete(model, tok, prompts, max_new_tokens) -> texts

The rollout engine's own decode loop (finished rows leave the batch, decode.py), at temperature 0, on the kernels
`generation.cpu_decode` chooses. Not here: scoring what was decoded (reasoning_rl/eval/held_out.py).
"""
from __future__ import annotations

from . import cpu_kernels, decode
from .base import stop_ids


def greedy_complete(model, tokenizer, prompts: list[str], max_new_tokens: int = 32, batch_size: int = 128) -> list[str]:
    """Greedy completions (the rollout engine's decode loop: finished rows leave the batch), EOS not included."""
    return greedy_decode(model, tokenizer, prompts, max_new_tokens, batch_size)[0]


def greedy_decode(model, tokenizer, prompts: list[str], max_new_tokens: int = 32, batch_size: int = 128,
                  cpu_decode: str = "auto", stop: tuple[str, ...] = ()) -> tuple[list[str], list[bool]]:
    """Greedy completions, EOS not included, and for each whether it was cut at `max_new_tokens` (no end of turn
    and no stop string); on the kernels `cpu_decode` chooses (GenerationConfig.cpu_decode). `stop`: stop strings (a
    completion ends at the first, cut before it)."""
    texts: list[str] = []
    cut: list[bool] = []
    tokenizer.padding_side = "left"
    stops = stop_ids(model, tokenizer)
    was_training = model.training
    model.eval()
    try:
        with cpu_kernels.decoding(cpu_decode, model, min(len(prompts), batch_size)):  # products, attention as chosen
            for i in range(0, len(prompts), batch_size):
                enc = tokenizer(prompts[i:i + batch_size], return_tensors="pt", padding=True).to(model.device)
                ids, _, lengths = decode.sample(model, enc["input_ids"], enc["attention_mask"], max_new_tokens,
                                                stops, temperature=0.0, stop_texts=stop, tokenizer=tokenizer)
                for row, n in zip(ids.tolist(), lengths.tolist()):
                    text, stopped = decode.cut_at_stop(tokenizer.decode(row[:n], skip_special_tokens=True), stop)
                    texts.append(text)
                    cut.append(not stopped and (n == 0 or row[n - 1] not in stops))  # no end of turn, no stop
    finally:
        model.train(was_training)
    return texts, cut
