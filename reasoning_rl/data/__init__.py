"""What runs write and read back: the rollout archive, preference pairs, curated datasets, run directories.

    archive.py   every verified sample of a run, one JSON line each (reverify and pairs read it)
    pairs.py     preference pairs from verified groups (passed vs failed, same prompt)
    curate.py    sample G completions per prompt, verify them, write the rows back with pass rates
    run_dir.py   where a run writes, and the rule that no run overwrites another by accident
"""
