"""Run `reasoning-rl train grpo` in this process with a signal sent to itself from inside one function of the
round (tests/test_interrupts.py): the signal arrives in that phase, never between rounds. A process of its own, so
that the signals and the handlers they meet stay out of the test runner's process.

    python -m tests.helpers.signal_in_phase TARGET CALL SIGNAL -- ARGV...
        TARGET  module.function or module.Class.method (patched for this run only)
        CALL    the signal is sent on its CALL-th call
    exit status: main's; stdout's last line: how many calls TARGET had
"""
import importlib
import os
import signal
import sys


def main() -> int:
    target, call, sig = sys.argv[1], int(sys.argv[2]), signal.Signals[sys.argv[3]]
    argv = sys.argv[sys.argv.index("--") + 1:]
    module, _, name = target.rpartition(".")
    try:
        owner = importlib.import_module(module)
    except ModuleNotFoundError:  # module.Class.method
        module, _, cls = module.rpartition(".")
        owner = getattr(importlib.import_module(module), cls)
    original, calls = getattr(owner, name), []

    def signalled(*a, **k):
        calls.append(1)
        if len(calls) == call:
            os.kill(os.getpid(), sig)
        return original(*a, **k)

    setattr(owner, name, signalled)
    from reasoning_rl.cli import main as cli_main

    rc = cli_main(argv)
    print(len(calls), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
