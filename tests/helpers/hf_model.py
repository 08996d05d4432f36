"""A small Hugging Face model as a user brings one: a Qwen2-architecture causal LM with a byte-level BPE
tokenizer trained here with `tokenizers`, a ChatML chat template, saved with `save_pretrained` and loaded
by path. Random weights (nothing is downloaded); tiny enough to train a few rounds on 2 CPU cores.

Also `gsm8k_rows`: GSM8K-format rows (`question`, `answer` ending in `#### N`) written here.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def gsm8k_rows(n: int, seed: int = 0) -> list[dict]:
    """Word problems in GSM8K's format: a question and a worked answer whose last line is '#### <answer>'."""
    rng = random.Random(seed)
    names = ["Ann", "Ben", "Cara", "Dev", "Eli", "Fay", "Gus", "Hana"]
    things = ["apples", "eggs", "books", "pens", "cards", "shells"]
    rows = []
    for i in range(n):
        who, what = rng.choice(names), rng.choice(things)
        a, b, price = rng.randint(2, 40), rng.randint(2, 40), rng.randint(1, 9)
        q = (f"{who} has {a} {what} and buys {b} more. Each costs ${price}. How many dollars are all of "
             f"{who}'s {what} worth? (problem {i})")
        rows.append({"question": q, "answer": f"{who} has {a}+{b}=<<{a}+{b}={a + b}>>{a + b} {what}.\n"
                                              f"They are worth {a + b}*{price}=<<{a + b}*{price}={(a + b) * price}>>"
                                              f"{(a + b) * price} dollars.\n#### {(a + b) * price}"})
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def build_hf_model(out: Path, corpus: list[str], vocab_size: int = 400, hidden: int = 64, layers: int = 2,
                   arch: str = "qwen2", seed: int = 0, chat: bool = True) -> Path:
    """Train a byte-level BPE tokenizer on `corpus`, build a small `arch` (qwen2 | llama) model, save both. `chat`
    False: a base model (no chat template; its EOS <|endoftext|>)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>" if chat else "<|endoftext|>",
                                  pad_token="<|endoftext|>", additional_special_tokens=["<|im_start|>"])
    if chat:
        tok.chat_template = CHATML
    torch.manual_seed(seed)
    kw = dict(vocab_size=len(tok), hidden_size=hidden, intermediate_size=4 * hidden, num_hidden_layers=layers,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
              eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, tie_word_embeddings=True)
    model = Qwen2ForCausalLM(Qwen2Config(**kw)) if arch == "qwen2" else LlamaForCausalLM(LlamaConfig(**kw))
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def biased_decoder(out: Path, corpus: list[str], arch: str):
    """A small `arch` model and its tokenizer loaded back from `build_hf_model`, eval mode, left padding, every
    bias drawn from N(0, 0.5) (qwen2's q/k/v biases start at zero: a misplaced one would not show)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = build_hf_model(out, corpus, vocab_size=400, arch=arch)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.5)
    tok = AutoTokenizer.from_pretrained(folder)
    tok.padding_side = "left"
    return model, tok
