"""The commands: `reasoning-rl` and its subcommands, the demo, the run report and `reverify`.

    commands.py   the parser's root, the inspect/report/demo commands (`reasoning-rl = reasoning_rl.cli:main`)
    train.py      train grpo|ppo|distill|prm|dpo and sft: each parser beside its function
    args.py       argument types, the one-line errors, the checks that run before any model loads
    data.py       curate, pairs, eval, task check, reverify, sft of a model other than tiny
    verify.py     verify, verifiers calibrate, verifiers probe (torch-free)
    demo.py       the main job on the embedded default, or on a real model
    tool_demo.py  `demo --model ... --tools`: a real model's cold start on tool traces, then GRPO with the tool
    report.py     one self-contained HTML page of a run (report_page.html draws it)
    reverify.py   re-score a run's archive with other verifiers

The top row of `reasoning_rl` (docs/architecture.md): it may import every other folder; nothing imports it.
"""
from .commands import main

__all__ = ["main"]
