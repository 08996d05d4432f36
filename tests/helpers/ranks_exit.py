"""A launched rank that says, at its very end, whether its process group is still alive (a test's program).

    torchrun --standalone --nproc-per-node 2 -m tests.helpers.ranks_exit

Its own exit hook is registered before `Ranks` registers `release_process_group`; exit hooks run last-registered
first, so this one runs after it and sees what the interpreter's teardown would find.
"""
from __future__ import annotations

import atexit

import torch

from reasoning_rl.trainers.distributed import Ranks


def main() -> None:
    state = {}

    def report() -> None:
        print(f"rank {state['rank']} group alive at exit: {torch.distributed.is_initialized()}", flush=True)

    atexit.register(report)
    ranks = Ranks()
    state["rank"] = ranks.rank
    seen = ranks.gather([ranks.rank])  # a collective, so the group's threads have worked
    print(f"rank {ranks.rank} of {ranks.world} gathered {seen}", flush=True)


if __name__ == "__main__":
    main()
