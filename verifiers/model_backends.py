"""The torch side of model-backed verifiers: a local judge's generation and a PRM's step scoring.

`verifiers/` stays importable without torch; `verifiers.judge` (backend "hf") and
`verifiers.prm` import this module only when they run a model. Nothing here decides a verdict.
"""
from __future__ import annotations

from typing import Sequence


def load_causal_lm(path: str):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


def load_prm(path: str, mode: str, device: str = "cpu"):
    from transformers import AutoModelForCausalLM, AutoModelForTokenClassification, AutoTokenizer

    cls = AutoModelForTokenClassification if mode == "token_classification" else AutoModelForCausalLM
    return cls.from_pretrained(path).to(device).eval(), AutoTokenizer.from_pretrained(path)


def generate_reply(model, tok, text: str, max_tokens: int, temperature: float, seed: int) -> tuple[str, dict]:
    """One chat-templated (when the tokenizer has a template) completion and its token counts."""
    import torch

    if getattr(tok, "chat_template", None):
        text = tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True)
    enc = tok(text, return_tensors="pt")
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=max_tokens, do_sample=temperature > 0,
                             pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
    new = out[0, enc["input_ids"].shape[1]:]
    return tok.decode(new, skip_special_tokens=True), {"prompt_tokens": enc["input_ids"].shape[1],
                                                        "completion_tokens": int(new.shape[0])}


def prm_step_probabilities(model, encoded: Sequence[tuple[list[int], list[int]]], pad_id: int, mode: str,
                           plus_id: int | None = None, minus_id: int | None = None, batch_size: int = 32,
                           device: str = "cpu") -> list[list[float]]:
    """p(step correct) at each step tag: softmax of a 2-label head, or p(+) / (p(+) + p(-)) of a causal LM.
    `encoded`: (token ids, tag positions) per solution; batched with right padding."""
    import torch

    out: list[list[float]] = []
    for i in range(0, len(encoded), batch_size):
        chunk = encoded[i:i + batch_size]
        T = max(len(ids) for ids, _ in chunk)
        x = torch.full((len(chunk), T), pad_id, dtype=torch.long)  # (B, T)
        mask = torch.zeros(len(chunk), T, dtype=torch.long)
        for b, (ids, _) in enumerate(chunk):
            x[b, :len(ids)] = torch.tensor(ids)
            mask[b, :len(ids)] = 1
        with torch.no_grad():
            logits = model(input_ids=x.to(device), attention_mask=mask.to(device)).logits.float().cpu()  # (B, T, C)
        for b, (_, ends) in enumerate(chunk):
            if mode == "token_classification":
                p = torch.softmax(logits[b, ends], dim=-1)[:, 1]
            else:
                p = torch.softmax(logits[b, ends][:, [plus_id, minus_id]], dim=-1)[:, 0]
            out.append([float(v) for v in p])
    return out
