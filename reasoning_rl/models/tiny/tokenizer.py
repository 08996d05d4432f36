"""A character-level tokenizer built in code, wrapped as a `PreTrainedTokenizerFast`.

One token per printable ASCII character (plus newline and tab), and four special
tokens. Built with the `tokenizers` library (a BPE model with no merges, which maps
every character to its own id, and a Fuse decoder so decoding does not insert spaces),
so it saves and loads with `save_pretrained` / `from_pretrained` like any HF tokenizer.

Not here: byte fallback. A character outside the vocabulary becomes `<unk>`; the
procedural tasks never produce one.
"""
from __future__ import annotations

import string

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
CHARS = "".join(sorted(set(string.printable) - set("\r\x0b\x0c")))


def build_char_tokenizer():
    from tokenizers import Tokenizer, decoders, models, processors
    from transformers import PreTrainedTokenizerFast

    specials = [PAD, BOS, EOS, UNK]
    vocab = {tok: i for i, tok in enumerate(specials)}
    for ch in CHARS:
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=UNK))
    tok.decoder = decoders.Fuse()
    # `tok(text)` gives "<bos> text", as a pretrained model's tokenizer would.
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, vocab[BOS])])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=EOS, unk_token=UNK, pad_token=PAD,
        padding_side="left", clean_up_tokenization_spaces=False,
    )
    fast.model_max_length = 512
    # Plain prompt -> completion; a chat template so chat-style callers work too.
    fast.chat_template = (
        "{% for m in messages %}{{ m['content'] }}{% if not loop.last %}\n{% endif %}{% endfor %}"
    )
    return fast
