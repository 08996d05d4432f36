"""Models: where one comes from, how it loads, its adapters, its log-probs, and the SFT warm start.

    load.py       the policy and tokenizer `model.name_or_path` names (tiny, a folder, a GGUF file, a Hub name)
    sources.py    a name resolved to a folder `from_pretrained` loads (GGUF files converted once, cached)
    device.py     `model.device` and the thread count resolved
    lora.py       LoRA adapters (peft), the adapter-disabled reference, merged export
    logprobs.py   response-only token log-probs from a causal LM, padding and length buckets
    sft.py        the supervised warm start (response-only cross-entropy), cached for the embedded default
    tiny/         the embedded default: a character tokenizer and a ~1 M-parameter Llama, built in code
"""
