"""Presets: the column layout of the public dataset formats people bring, written as data.

A preset says which column holds the prompt, where the reference is (one column, read through
an extractor, or several columns gathered into one dict for the `code` verifier's public test
formats), which column is a stable id and which a gold completion for SFT, what the outcome
verifier reads (the completion alone, or the raw prompt + completion), and which verifier is
the outcome. Every field can be overridden by the `tasks.*` knob of the same name.

    gsm8k         question / answer "... #### 72"            math,  completion
    math          problem / answer, else last \\boxed{} of solution   (MATH, MATH-500, DeepScaleR)
    humaneval     prompt / {test, entry_point, prompt}         code,  prompt + completion
    mbpp          text (+ first test) / {test_list, test_setup_code, test_imports}   code, completion
    apps          question / {input_output}                    code,  completion (stdio or fn_name calls)
    codecontests  description / {public,private,generated_tests}   code, completion (stdio)
    leetcode      query / {entry_point, input_output, prompt}  code,  completion (a method of class Solution)
    livecodebench question_content + starter_code / {starter_code, public_test_cases, metadata}   code, completion
    verl          prompt (messages) / reward_model.ground_truth, outcome per row from data_source
    trl           prompt (string or messages) / answer          math,  completion

Not here: reading files (task/sources.py) or rendering prompts (task/task.py). No module per dataset.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    prompt_col: str = "prompt"
    # (column, extractor) alternatives for a single-column reference; the first column a row has wins
    reference: tuple[tuple[str, str], ...] = (("answer", "none"),)
    # columns gathered into a dict reference (code test formats); when set, `reference` is not used
    reference_cols: tuple[str, ...] = ()
    id_col: str = ""
    target_col: str = ""
    template: str = ""
    checked: str = "completion"
    outcome: str = "math"
    # a column whose value names the outcome verifier per row (verl's data_source), through `route`
    outcome_col: str = ""


PRESETS: dict[str, Preset] = {
    "": Preset(),
    "gsm8k": Preset(prompt_col="question", reference=(("answer", "gsm8k"),), target_col="answer"),
    "math": Preset(prompt_col="problem", reference=(("answer", "none"), ("solution", "boxed")),
                   target_col="solution"),
    "humaneval": Preset(prompt_col="prompt", reference_cols=("test", "entry_point", "prompt"), id_col="task_id",
                        target_col="canonical_solution", checked="prompt+completion", outcome="code"),
    "mbpp": Preset(prompt_col="text", reference_cols=("test_list", "test_setup_code", "test_imports"),
                   id_col="task_id", target_col="code", template="{text}\nYour code should pass this test:\n"
                                                                 "{test_list[0]}\n", outcome="code"),
    "apps": Preset(prompt_col="question", reference_cols=("input_output",), id_col="problem_id", outcome="code"),
    "codecontests": Preset(prompt_col="description", reference_cols=("public_tests", "private_tests",
                                                                     "generated_tests"), id_col="name",
                           outcome="code"),
    "leetcode": Preset(prompt_col="query", reference_cols=("entry_point", "input_output", "prompt"), id_col="task_id",
                       target_col="completion", outcome="code"),
    "livecodebench": Preset(prompt_col="question_content", reference_cols=("starter_code", "public_test_cases",
                                                                           "metadata"), id_col="question_id",
                            template="{question_content}\n\n{starter_code}", outcome="code"),
    "verl": Preset(prompt_col="prompt", reference=(("reward_model.ground_truth", "none"),),
                   id_col="extra_info.index", outcome_col="data_source"),
    "trl": Preset(prompt_col="prompt", reference=(("answer", "none"),)),
}

# verl's data_source values and the verifier each one means (a data source not listed is the preset's outcome)
DATA_SOURCES: dict[str, str] = {
    "openai/gsm8k": "math", "gsm8k": "math", "lighteval/MATH": "math", "DigitalLearningGmbH/MATH-lighteval": "math",
    "HuggingFaceH4/MATH-500": "math", "math": "math", "codecontests": "code", "apps": "code",
    "taco": "code", "livecodebench": "code", "humaneval": "code", "mbpp": "code",
}
