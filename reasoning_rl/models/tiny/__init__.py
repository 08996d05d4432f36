"""The embedded default model: a character-level tokenizer and a tiny Llama, built in code (no download)."""
