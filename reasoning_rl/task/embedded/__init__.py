"""The embedded default's data: procedural problems with exact answers, made in code (nothing downloaded).

    arithmetic.py      add, sub, chain, mul, mul2 for the tiny model; make_rows(cfg) for every family
    word_problems.py   one- and two-step word problems for a real chat model
    programs.py        short Python functions with hidden tests (tasks.kind=code)
    split.py           the train / held-out split by a stable hash of each prompt
"""
