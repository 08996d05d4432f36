"""`reasoning-rl recipe`: a data set's gold solutions, then RL from there, stage by stage.

    run.py     run_recipe: the stages in order, resumable; the summary table; DIR/final
    stages.py  each stage (sft, grpo, ppo, distill, dpo, rest) and the held-out score after it
    record.py  DIR/recipe.json: where each stage stands

A row of its own in docs/architecture.md, between the trainers it calls and the commands that call it.
"""
