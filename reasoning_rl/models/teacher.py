"""A distillation teacher: loaded by the same sources as the policy, frozen, and checked against the student.

    check_teacher(cfg, student_tok)   before anything loads: the source exists (distill.teacher names it) and its
                                      tokenizer is the student's (one line naming both otherwise)
    load_teacher(cfg, device) -> (model, summary)   frozen (no gradients, eval mode) on distill.teacher_device

On-policy distillation scores the student's sampled token ids with the teacher, so both need one vocabulary: a
teacher with another tokenizer is refused (no cross-tokenizer method is built). "tiny" as the teacher is the
embedded model's SFT warm start. Not here: the scoring (trainers/distill.py) or its maths (algos/distill.py).
"""
from __future__ import annotations

from ..config.sections import Config
from ..errors import UserError
from .load import check_model_source, load_pretrained, load_tokenizer
from .sft import build_sft_checkpoint

KEY = "distill.teacher"


def _name(cfg: Config, log=print) -> str:
    d = cfg.distill
    return build_sft_checkpoint(cfg, log=log) if d.teacher == "tiny" else d.teacher


def check_teacher(cfg: Config, student_tok) -> None:
    """UserError (one line) unless distill.teacher can be loaded and tokenizes as the student does. Loads the
    teacher's tokenizer only (no weights)."""
    d = cfg.distill
    if not d.teacher:
        raise UserError(f"{KEY}: empty; name the teacher (a model name, a Hugging Face folder or a .gguf file), e.g. "
                        "--set distill.teacher=runs/grpo/final")
    check_model_source(d.teacher, d.teacher_gguf_file, key=KEY)
    if d.teacher == "tiny":
        teacher_tok = load_tokenizer(cfg, "tiny")
    else:
        from .sources import resolve

        teacher_tok = load_tokenizer(cfg, resolve(d.teacher, d.teacher_gguf_file, cfg.model.dtype))
    ours, theirs = student_tok.get_vocab(), teacher_tok.get_vocab()
    if ours != theirs:
        shared = sum(ours.get(t) == i for t, i in theirs.items())
        raise UserError(f"{KEY}: {d.teacher!r} tokenizes with another vocabulary than the student "
                        f"{cfg.model.name_or_path!r} ({len(theirs)} against {len(ours)} tokens, {shared} with the same "
                        "id); distillation scores the student's token ids with the teacher, so both need one tokenizer")


def load_teacher(cfg: Config, device, log=print):
    """(teacher, summary): the frozen teacher on distill.teacher_device ("same": `device`, the student's), and a
    line saying what was loaded and the memory its weights take."""
    d = cfg.distill
    model, _ = load_pretrained(cfg, _name(cfg, log), d.teacher_gguf_file if d.teacher != "tiny" else "", log=log)
    target = device if d.teacher_device == "same" else d.teacher_device
    model = model.to(target).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    n = sum(p.numel() for p in model.parameters())
    mib = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
    return model, f"teacher {d.teacher}: {n / 1e6:.1f} M parameters, {mib:.0f} MiB of weights on {target}"
