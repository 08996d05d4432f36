"""Configs: unknown keys, wrong types and out-of-range values are errors naming key and value."""
import subprocess

import pytest

from reasoning_rl import config
from reasoning_rl.config.knobs import ConfigError
from reasoning_rl.config.sections import Config

from .conftest import PY, run_env

# (overrides, fragment the error must contain) -- each a mistake a user makes
BAD = [
    (["sft.stpes=10"], "unknown config key 'sft.stpes' (value 10); did you mean 'sft.steps'?"),
    (["modle.name_or_path=x"], "unknown config key 'modle' (value {'name_or_path': 'x'}); did you mean 'model'?"),
    (["grpo.eval_evry=5"], "unknown config key 'grpo.eval_evry' (value 5); did you mean 'grpo.eval_every' or "),
    (["grpo.zzz=1"], "unknown config key 'grpo.zzz' (value 1); `reasoning-rl config --describe` lists every key"),
    (["model.lora.zzz=1"], "unknown config key 'model.lora.zzz' (value 1); valid keys under model.lora: alpha, "),
    (["sft.steps=ten"], "sft.steps: value 'ten' is not an int"),
    (["sft.steps=0"], "sft.steps: value 0 is below the minimum 1"),
    (["sft.lr=-1"], "sft.lr: value -1.0 is below the minimum 0.0"),
    (["tasks.max_digits=99"], "tasks.max_digits: value 99 is above the maximum 12"),
    (["model.sft_warm_start=maybe"], "model.sft_warm_start: value 'maybe' is not a bool"),
    (["tasks.families=add"], "tasks.families: expected a list"),
    (["sft=3"], "sft: expected a section"),
    (["seed"], "--set expects section.key=value"),
    # keys that moved when GRPO and PPO came to share one config base: the error names the new key
    (["grpo.max_tokens=16"], "'grpo.max_tokens' (value 16) is now 'generation.max_tokens'"),
    (["ppo.samples_per_prompt=4"], "is now 'ppo.group_size'"),
    (["sft.eval_size=10"], "is now 'eval.size'"),
    (["ppo.ent_coef=0.01"], "is now 'ppo.entropy_coef'"),  # one name for one thing: GRPO's
    # choices typed as Literal
    (["grpo.loss_type=dpo"], "grpo.loss_type: value 'dpo' is not one of ['grpo', 'dr_grpo', 'dapo', 'bnpo', 'cispo']"),
    (["ppo.engine=tgi"], "ppo.engine: value 'tgi' is not one of ['hf', 'worker', 'vllm', 'openai']"),
    # cross-field rules, checked when the config is built (before any model loads)
    (["grpo.engine=openai"], "grpo.engine=openai needs grpo.engine_url and grpo.engine_model"),
    (["ppo.engine=openai", "ppo.engine_url=http://x/v1"], "ppo.engine=openai needs ppo.engine_url"),
    (["grpo.advantage=process"], "grpo.advantage=process needs grpo.prm_model"),
    (["grpo.group_size=1"], "grpo.group_size: value 1 is below 2"),
    (["model.tiny.num_heads=3"], "model.tiny.hidden_size (128) must be divisible by model.tiny.num_heads (3)"),
]


@pytest.mark.parametrize("overrides,fragment", BAD)
def test_bad_overrides_name_the_key(overrides, fragment):
    with pytest.raises(ConfigError) as e:
        config.load(Config, overrides=overrides)
    assert fragment in str(e.value)


def test_rl_sections_share_one_base_with_their_own_defaults():
    """grpo and ppo are RLConfig plus their own knobs: a shared knob has one name and one help text in both,
    and PPO's recommended values differ where the critic makes groups unnecessary."""
    import dataclasses

    from reasoning_rl.config.sections import GRPOConfig, PPOConfig, RLConfig

    cfg = config.load(Config)
    shared = {f.name: f for f in dataclasses.fields(RLConfig)}
    for section in (GRPOConfig, PPOConfig):
        fields = {f.name: f for f in dataclasses.fields(section)}
        assert set(shared) <= set(fields)
        for name, f in shared.items():
            assert fields[name].metadata["help"] == f.metadata["help"], (section.__name__, name)
    assert "num_generations" in shared["group_size"].metadata["help"]  # TRL's name, beside ours
    assert (cfg.grpo.group_size, cfg.ppo.group_size) == (8, 2)
    assert (cfg.grpo.filter_mixed, cfg.ppo.filter_mixed) == (True, False)
    assert not {"critic_lr", "gamma", "lam"} & {f.name for f in dataclasses.fields(GRPOConfig)}
    assert not {"loss_type", "prm_model"} & {f.name for f in dataclasses.fields(PPOConfig)}
    assert config.load(Config, overrides=["ppo.group_size=1"]).ppo.group_size == 1  # PPO needs no group


def test_help_texts_hold_no_measured_figures():
    """Measured numbers go stale in help texts: no percentages, seconds or minutes measured on some machine."""
    import re

    for key, _, text in config.describe(Config):
        assert not re.search(r"\d+(\.\d+)?\s*(%|s\b|seconds|minutes|points)|~\d", text), (key, text)


def test_defaults_and_overrides():
    cfg = config.load(Config, overrides=["sft.steps=7", "tasks.families=[add, mul]", "model.tiny.num_layers=2",
                                         "sft.lr=1e-4"])
    assert cfg.sft.lr == 1e-4  # YAML 1.1 would read 1e-4 as a string
    assert cfg.sft.steps == 7 and cfg.tasks.families == ("add", "mul") and cfg.model.tiny.num_layers == 2
    assert cfg.sft.batch_size == Config().sft.batch_size
    # a sentence with a colon is the sentence (YAML would read a mapping), a comment sign is text
    cfg = config.load(Config, overrides=["tasks.instruction=Use the tool: print the result # exactly"])
    assert cfg.tasks.instruction == "Use the tool: print the result # exactly"
    with pytest.raises(AttributeError):
        cfg.seed = 3  # frozen


def test_yaml_and_toml_files_agree(tmp_path):
    (tmp_path / "c.yaml").write_text("seed: 5\nsft:\n  steps: 11\n  lr: 0.001\n")
    (tmp_path / "c.toml").write_text("seed = 5\n[sft]\nsteps = 11\nlr = 0.001\n")
    a = config.load(Config, tmp_path / "c.yaml")
    b = config.load(Config, tmp_path / "c.toml")
    assert a == b and a.seed == 5 and a.sft.steps == 11
    c = config.load(Config, tmp_path / "c.yaml", ["sft.steps=12"])
    assert c.sft.steps == 12  # --set wins over the file


def test_file_with_misspelled_key(tmp_path):
    (tmp_path / "c.yaml").write_text("sft:\n  batchsize: 8\n")
    with pytest.raises(ConfigError, match="unknown config key 'sft.batchsize' \\(value 8\\)"):
        config.load(Config, tmp_path / "c.yaml")


def test_missing_or_malformed_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        config.load(Config, tmp_path / "nope.yaml")
    (tmp_path / "bad.toml").write_text("seed = [\n")
    with pytest.raises(ConfigError, match="bad.toml"):
        config.load(Config, tmp_path / "bad.toml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        config.load(Config, tmp_path / "list.yaml")


def test_every_knob_has_help():
    rows = config.describe(Config)
    assert len(rows) > 15
    missing = [k for k, _, h in rows if not h.strip()]
    assert not missing, f"knobs without help text: {missing}"


def test_cli_reports_misspelled_key_and_exits_2(tmp_path):
    r = subprocess.run([PY, "-m", "reasoning_rl", "config", "--set", "sft.stpes=3"],
                       capture_output=True, text=True, env=run_env(), timeout=120)
    assert r.returncode == 2
    assert "unknown config key 'sft.stpes'" in r.stderr
