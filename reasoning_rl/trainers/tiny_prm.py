"""A tiny process reward model for the embedded default, trained on solutions whose labels are
known by construction; and its evaluation (first-wrong-step accuracy, AUC of the `min` score).

Data: chains of additions ("12+7+30+5=") solved step by step ("12+7=19", "19+30=49", "49+5=54",
steps joined by "\\n\\n"), half of them with one injected error: at a uniform step the result is
off by 1-9, and the later steps carry on correctly from the wrong value (locally valid, globally
wrong). Plus one-step answers to "a+b=" (the shape of the tiny policy's own completions). Step
labels say whether each step is right given the steps before it (PRM800K-style), so the
first step scored below 0.5 is the first error, and `min` over steps flags a wrong solution. Split by a stable
hash of the prompt, like the tasks.

Model: the tiny Llama as `LlamaForTokenClassification` (2 labels), its transformer initialised from
the SFT policy (it already reads arithmetic), reading the "\\n" tag after each step. Deliberately
small (its training time is in docs/results.md); the verifier that serves it is `verifiers/prm.py`.
"""
from __future__ import annotations

import hashlib
import os
import random
from typing import Callable

from verifiers.prm import PRMConfig, PRMVerifier

from ..config.sections import PRMTrainConfig
from ..models.device import configure_process
from ..models.load import load_policy
from ..models.optim import adamw
from ..models.sft import seed_everything
from ..models.tiny.model import build_tiny_model
from ..models.tiny.tokenizer import build_char_tokenizer

SEP, TAG = "\n\n", "\n"


def _heldout(prompt: str) -> bool:
    return int.from_bytes(hashlib.sha256(("prm" + prompt).encode()).digest()[:8], "big") % 10 == 0


def make_solution(rng: random.Random, cfg: PRMTrainConfig, wrong: bool) -> dict:
    """{"prompt", "steps", "labels", "first_error"}: labels 1/0 per step (right given the steps before it);
    first_error None if all correct."""
    n = rng.randint(2, cfg.max_operands)
    xs = [rng.randint(0, cfg.max_operand) for _ in range(n)]
    prompt = "+".join(map(str, xs)) + "="
    if n == 2:  # the policy's shape: a bare answer
        y = xs[0] + xs[1]
        if wrong:
            y = max(0, y + rng.choice([-1, 1]) * rng.randint(1, 9)) if y > 9 else y + rng.randint(1, 9)
        ok = y == xs[0] + xs[1]
        return {"prompt": prompt, "steps": [str(y)], "labels": [int(ok)], "first_error": None if ok else 0}
    k_err = rng.randrange(n - 1) if wrong else None
    steps, labels, s, first = [], [], xs[0], None
    for k, x in enumerate(xs[1:]):
        y = s + x
        if k == k_err:
            y = y + rng.randint(1, 9) if y < 10 or rng.random() < 0.5 else y - rng.randint(1, min(9, y))
        if first is None and y != s + x:
            first = k
        steps.append(f"{s}+{x}={y}")
        labels.append(int(y == s + x))  # is this step right given the ones before it (PRM800K-style)
        s = y
    return {"prompt": prompt, "steps": steps, "labels": labels, "first_error": first}


def make_data(cfg: PRMTrainConfig, seed: int = 0) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)
    train, test = [], []
    while len(train) < cfg.num_train or len(test) < cfg.num_test:
        sol = make_solution(rng, cfg, rng.random() < cfg.error_rate)
        bucket, want = (test, cfg.num_test) if _heldout(sol["prompt"]) else (train, cfg.num_train)
        if len(bucket) < want:
            bucket.append(sol)
    return train, test


def _encode(tok, sol: dict) -> tuple[list[int], list[int]]:
    ids = list(tok(sol["prompt"])["input_ids"])
    ends = []
    for step in sol["steps"]:
        ids += tok(step + TAG, add_special_tokens=False)["input_ids"]
        ends.append(len(ids) - 1)
    return ids, ends


def evaluate_prm(step_scores: list[list[float]], solutions: list[dict], threshold: float = 0.5) -> dict:
    """First-wrong-step accuracy (over wrong solutions, and over all with 'none' as a class) and the AUC
    of the min aggregate separating correct from wrong solutions."""
    hits_wrong = n_wrong = hits_all = 0
    pos, neg = [], []
    for scores, sol in zip(step_scores, solutions):
        pred = next((k for k, s in enumerate(scores) if s < threshold), None)
        hits_all += pred == sol["first_error"]
        if sol["first_error"] is not None:
            n_wrong += 1
            hits_wrong += pred == sol["first_error"]
            neg.append(min(scores))
        else:
            pos.append(min(scores))
    pairs = [(p > q) + 0.5 * (p == q) for p in pos for q in neg]
    return {"first_error_accuracy": hits_wrong / max(1, n_wrong), "first_error_accuracy_all": hits_all / len(solutions),
            "auc_min": sum(pairs) / max(1, len(pairs)), "n_wrong": n_wrong, "n": len(solutions)}


def train_prm(cfg, log: Callable[[str], None] = print) -> dict:
    """Train the tiny PRM (cfg: the root Config; knobs in cfg.prm). Returns held-out metrics; saves output_dir/final."""
    import math

    import torch
    from transformers import LlamaForTokenClassification


    p = cfg.prm
    configure_process(cfg)  # torch's threads and the C allocator
    seed_everything(cfg.seed)
    if p.init_from_sft:
        policy, tok = load_policy(cfg, log=log)
    else:
        tok = build_char_tokenizer()
        policy = build_tiny_model(cfg.model.tiny, tok, seed=cfg.seed)
    config = policy.config
    config.num_labels = 2
    model = LlamaForTokenClassification(config)
    missing = model.model.load_state_dict(policy.model.state_dict(), strict=True)
    del policy, missing
    train, test = make_data(p, seed=cfg.seed)
    log(f"prm: {len(train)} train / {len(test)} held-out solutions; {sum(s['first_error'] is not None for s in train)} "
        f"with an injected error")
    head = [q for n, q in model.named_parameters() if n.startswith("score")]
    body = [q for n, q in model.named_parameters() if not n.startswith("score")]
    opt = adamw([{"params": body, "lr": p.lr}, {"params": head, "lr": p.head_lr or p.lr}], lr=p.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 50) * (
        0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, s / p.steps)))))
    rng = random.Random(cfg.seed)
    encoded = [_encode(tok, s) + (s["labels"],) for s in train]  # tokenise once
    model.train()
    for step in range(1, p.steps + 1):
        batch = rng.sample(encoded, min(p.batch_size, len(encoded)))
        T = max(len(ids) for ids, _, _ in batch)
        x = torch.full((len(batch), T), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros(len(batch), T, dtype=torch.long)
        y = torch.full((len(batch), T), -100, dtype=torch.long)  # loss only at the step tags
        for b, (ids, ends, labels) in enumerate(batch):
            x[b, :len(ids)] = torch.tensor(ids)
            mask[b, :len(ids)] = 1
            y[b, ends] = torch.tensor(labels)
        loss = model(input_ids=x, attention_mask=mask, labels=y).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 250 == 0 or step == 1:
            log(f"prm step {step}/{p.steps}  loss {loss.item():.4f}")
    model.eval()
    final = os.path.join(p.output_dir, "final")
    model.save_pretrained(final)
    tok.save_pretrained(final)

    prm = PRMVerifier(PRMConfig(model=final, step_tag=TAG, step_separator=SEP))
    scores = prm.step_scores([s["prompt"] for s in test], [SEP.join(s["steps"]) for s in test])
    metrics = evaluate_prm(scores, test)
    log(f"prm held-out: first wrong step found {metrics['first_error_accuracy']:.3f} of {metrics['n_wrong']} wrong "
        f"solutions ({metrics['first_error_accuracy_all']:.3f} over all {metrics['n']}, 'no error' included); "
        f"AUC of min score {metrics['auc_min']:.3f}; model in {final}")
    return metrics
