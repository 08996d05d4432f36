"""The run configuration: every knob, its help text and recommended value, in one place.

Sections map to `--set section.key=value`. Later trainers add their sections here.
The machinery (loading, overrides, validation) is in `config.py`.
"""
from __future__ import annotations

from dataclasses import dataclass

from .config import ConfigError, knob


@dataclass(frozen=True)
class TinyModelConfig:
    hidden_size: int = knob(128, "width of the residual stream", min=16)
    num_layers: int = knob(4, "transformer blocks", min=1, max=64)
    num_heads: int = knob(2, "attention heads (head_dim = hidden_size / num_heads; vLLM CPU wants >= 64)", min=1)
    intermediate_size: int = knob(512, "MLP width", min=16)
    max_position_embeddings: int = knob(256, "longest prompt + completion in tokens", min=16)

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_heads:
            raise ConfigError(f"model.tiny.hidden_size ({self.hidden_size}) must be divisible by model.tiny.num_heads "
                              f"({self.num_heads})")


@dataclass(frozen=True)
class TaskConfig:
    kind: str = knob("arithmetic", "arithmetic (verifier `math`) | code (verifier `code`, tiny/code_tasks.py)",
                     choices=("arithmetic", "code"))
    families: tuple[str, ...] = knob(("add", "sub", "chain", "mul"), "task families to mix (see tiny/tasks.py; "
                                     "for kind=code, names from tiny/code_tasks.py, or none listed = all)")
    max_digits: int = knob(2, "largest operand length; 2 gives a tiny model room to learn and to improve", min=1, max=12)
    num_train: int = knob(4000, "train prompts", min=1)
    num_test: int = knob(400, "held-out prompts (never overlap train)", min=1)
    heldout_percent: int = knob(10, "share of the prompt space (by stable hash) reserved for held-out", min=1, max=90)
    seed: int = knob(0, "generation seed")


@dataclass(frozen=True)
class PRMTrainConfig:
    steps: int = knob(2500, "optimiser steps (about 10 minutes on one thread)", min=1)
    batch_size: int = knob(64, "solutions per step", min=1)
    lr: float = knob(3e-4, "peak AdamW learning rate of the transformer (cosine decay, 50 warm-up steps)", min=0.0)
    head_lr: float = knob(3e-3, "learning rate of the new classification head (0 = same as lr); a head faster "
                               "than a pretrained body keeps the body's arithmetic", min=0.0)
    num_train: int = knob(20000, "generated training solutions", min=1)
    num_test: int = knob(400, "held-out solutions (prompts never in training)", min=1)
    error_rate: float = knob(0.5, "share of solutions with one injected error", min=0.0, max=1.0)
    max_operands: int = knob(4, "longest chain (2 = a one-step answer)", min=2, max=8)
    max_operand: int = knob(9, "largest operand", min=1)
    init_from_sft: bool = knob(True, "start the transformer from the SFT policy (cached)")
    output_dir: str = knob("runs/prm", "where the trained PRM goes (final/)")


@dataclass(frozen=True)
class ModelConfig:
    name_or_path: str = knob("tiny", "'tiny' = the embedded default built in code; otherwise any HF causal LM name or path")
    tiny: TinyModelConfig = knob(default_factory=TinyModelConfig, help="shape of the embedded tiny model")
    sft_warm_start: bool = knob(True, "for 'tiny': start from the cached SFT checkpoint (built on first use)")


@dataclass(frozen=True)
class SFTConfig:
    steps: int = knob(1200, "optimiser steps; 1200 reaches ~67% held-out (greedy) on the default tasks", min=1)
    batch_size: int = knob(64, "sequences per step", min=1)
    lr: float = knob(3e-3, "peak AdamW learning rate", min=0.0)
    warmup_steps: int = knob(50, "linear warm-up steps, then cosine decay to 10%", min=0)
    weight_decay: float = knob(0.0, "AdamW weight decay", min=0.0)
    grad_clip: float = knob(1.0, "max gradient norm (0 = off)", min=0.0)
    worked_fraction: float = knob(0.5, "share of SFT targets that show their work step by step "
                                  "(tiny/tasks.py worked_solution; the rest are direct answers)", min=0.0, max=1.0)
    eval_size: int = knob(400, "held-out prompts scored at the end", min=1)
    log_every: int = knob(100, "print the loss every N steps", min=1)


@dataclass(frozen=True)
class GRPOConfig:
    steps: int = knob(60, "optimiser rounds (each: sample, verify, filter, update); the demo gains +27 points by 25", min=1)
    prompts_per_step: int = knob(32, "groups per batch (B)", min=1)
    group_size: int = knob(8, "samples per prompt (G); 8 gives mixed groups for pass rates 0.1-0.9", min=2)
    lr: float = knob(1e-4, "AdamW learning rate (constant after warm-up); 1e-3 collapses the tiny model", min=0.0)
    warmup_steps: int = knob(5, "linear learning-rate warm-up", min=0)
    temperature: float = knob(1.0, "sampling temperature", min=0.0)
    top_p: float = knob(1.0, "sampling nucleus mass", min=0.0, max=1.0)
    max_tokens: int = knob(32, "longest completion in tokens (the tiny tasks need <= 6 direct, <= 30 worked)", min=1)
    loss_type: str = knob("dapo", "grpo | dr_grpo | dapo | bnpo: how token losses aggregate (TRL's names)",
                          choices=("grpo", "dr_grpo", "dapo", "bnpo"))
    advantage: str = knob("grpo", "grpo | dr_grpo | rloo | process (per-step PRM rewards, needs prm_model)",
                          choices=("grpo", "dr_grpo", "rloo", "process"))
    prm_model: str = knob("", "path of a PRM (e.g. runs/prm/final from `train prm`): its step scores are logged, "
                              "and with advantage=process they are the step rewards")
    scale_rewards: str = knob("group", "grpo std: group | batch | none", choices=("group", "batch", "none"))
    eps_low: float = knob(0.2, "PPO clip below 1", min=0.0, max=1.0)
    eps_high: float = knob(0.28, "PPO clip above 1 (DAPO clip-higher 0.28)", min=0.0)
    beta: float = knob(0.0, "KL-to-reference coefficient in the loss (0 = no reference model loaded)", min=0.0)
    kl_estimator: str = knob("k3", "k1 | k2 | k3", choices=("k1", "k2", "k3"))
    num_iterations: int = knob(1, "optimisation epochs over each batch (mu)", min=1)
    minibatch_size: int = knob(128, "sequences per optimiser step", min=1)
    length_buckets: int = knob(4, "forward/backward each minibatch as up to this many micro-batches of similar "
                                  "length, each padded only to its own longest (gradients accumulate to the same "
                                  "update); 1 = one padded batch", min=1)
    bf16: bool = knob(False, "autocast the update's forward passes to bfloat16 (where the device supports it)")
    grad_clip: float = knob(1.0, "max gradient norm (0 = off)", min=0.0)
    mask_truncated_completions: bool = knob(False, "leave completions that hit max_tokens out of the loss")
    filter_mixed: bool = knob(True, "keep only groups with a pass and a fail (DAPO dynamic sampling)")
    max_refill_rounds: int = knob(2, "extra generation rounds to refill a filtered batch", min=0)
    sampler: str = knob("mixed_band", "uniform | mixed_band", choices=("uniform", "mixed_band"))
    retire_after: int = knob(0, "retire a prompt after this many all-pass groups in a row (0 = never)", min=0)
    format_weight: float = knob(0.0, "weight of a think/answer format rule in the reward (0 = logged only)")
    train_prompts: int = knob(0, "RL on only the first N train prompts (0 = all); small N for smoke tests", min=0)
    eval_every: int = knob(10, "held-out greedy accuracy every N steps (400 prompts: about 8 s)", min=1)
    eval_size: int = knob(400, "held-out prompts scored at each evaluation", min=1)
    verifier_workers: int = knob(2, "verifier worker processes", min=1)
    rollout_chunks: int = knob(1, "generate each round in this many chunks and verify each chunk in the background "
                                  "while the next is generated: > 1 hides slow verification (code tasks: 4) behind "
                                  "generation, at the cost of smaller generation batches", min=1)
    control: str = knob("", "an ablation, not for training: shuffled_rewards gives every sample the verdicts of a "
                            "random sample of its round (same reward distribution, no signal; the archive then holds "
                            "the shuffled verdicts)", choices=("", "shuffled_rewards"))
    verifier_backend: str = knob("process", "process (local workers) | ray (Ray actors; RAY_ADDRESS joins a cluster)",
                                 choices=("process", "ray"))
    engine: str = knob("hf", "rollout engine: hf (transformers, the CPU default) | vllm (needs vLLM importable, "
                             "e.g. run under .venv-vllm; weights pushed in place) | openai (a `vllm serve` server at "
                             "engine_url; weights pushed through weights_dir)", choices=("hf", "vllm", "openai"))
    engine_url: str = knob("", "engine=openai: the server's OpenAI base URL, e.g. http://host:8000/v1")
    engine_model: str = knob("", "engine=openai: the served model name (vllm serve's --served-model-name, or its path)")
    weights_dir: str = knob("", "engine=openai: a folder the server can also read, for weight pushes "
                                "(empty = output_dir/weights; the server must run with VLLM_SERVER_DEV_MODE=1)")
    push_every: int = knob(1, "vllm/openai engines: push the trainer's weights every N rounds; samples then come "
                              "from weights up to N-1 updates old (the clipped ratio corrects for it)", min=1)
    checkpoint_every: int = knob(25, "save a resumable checkpoint every N steps (0 = only the final model)", min=0)

    def __post_init__(self) -> None:  # cross-field rules, checked when the config is built, not mid-run
        if self.engine == "openai" and not (self.engine_url and self.engine_model):
            raise ConfigError(f"grpo.engine=openai needs grpo.engine_url and grpo.engine_model (got "
                              f"{self.engine_url!r}, {self.engine_model!r})")
        if self.advantage == "process" and not self.prm_model:
            raise ConfigError("grpo.advantage=process needs grpo.prm_model (a PRM path; `reasoning-rl train prm` "
                              "makes one)")


@dataclass(frozen=True)
class PPOConfig:
    steps: int = knob(150, "optimiser rounds (each: sample, verify, score with the critic, update)", min=1)
    prompts_per_step: int = knob(64, "prompts per batch", min=1)
    samples_per_prompt: int = knob(2, "completions per prompt (the critic is the baseline: no groups needed)", min=1)
    lr: float = knob(1e-4, "policy AdamW learning rate", min=0.0)
    critic_lr: float = knob(1e-3, "critic AdamW learning rate (its value head starts at zero)", min=0.0)
    warmup_steps: int = knob(5, "linear learning-rate warm-up (both optimisers)", min=0)
    temperature: float = knob(1.0, "sampling temperature", min=0.0)
    max_tokens: int = knob(32, "longest completion in tokens (worked solutions need <= 30)", min=1)
    gamma: float = knob(1.0, "GAE discount (1.0 for outcome rewards on short completions)", min=0.0, max=1.0)
    lam: float = knob(0.95, "GAE lambda", min=0.0, max=1.0)
    eps: float = knob(0.2, "policy clip range", min=0.0, max=1.0)
    vf_clip: float = knob(0.2, "value clip range around the old values (0 = unclipped)", min=0.0)
    ent_coef: float = knob(0.0, "entropy bonus coefficient", min=0.0)
    kl_coef: float = knob(0.02, "KL-to-reference coefficient (0 = no reference model loaded)", min=0.0)
    kl_in_reward: bool = knob(True, "KL as per-token reward shaping (classic RLHF PPO); False = k3 KL in the loss. "
                                     "Never both")
    adaptive_kl: bool = knob(False, "adapt kl_coef towards kl_target (Ziegler et al. 2019)")
    kl_target: float = knob(0.05, "target KL per token for the adaptive controller", min=0.0)
    kl_horizon: int = knob(1000, "adaptive controller horizon in steps", min=1)
    num_epochs: int = knob(2, "optimisation epochs over each batch", min=1)
    minibatch_size: int = knob(64, "sequences per optimiser step", min=1)
    micro_batch_size: int = knob(0, "sequences per forward/backward; gradients accumulate to minibatch_size "
                                    "(0 = the whole minibatch at once)", min=0)
    whiten_advantages: bool = knob(True, "normalise advantages to zero mean, unit std over the batch's tokens")
    grad_clip: float = knob(1.0, "max gradient norm per model (0 = off)", min=0.0)
    bf16: bool = knob(False, "autocast the forward passes to bfloat16 (where the device supports it)")
    eval_every: int = knob(25, "held-out greedy accuracy every N steps", min=1)
    eval_size: int = knob(400, "held-out prompts scored at each evaluation", min=1)
    verifier_workers: int = knob(2, "verifier worker processes", min=1)
    train_prompts: int = knob(0, "RL on only the first N train prompts (0 = all); small N for smoke tests", min=0)
    checkpoint_every: int = knob(25, "save a resumable checkpoint every N steps (0 = only the final model)", min=0)


@dataclass(frozen=True)
class DPOConfig:
    backend: str = knob("ours", "ours | trl (TRL's DPOTrainer on the same dataset)", choices=("ours", "trl"))
    beta: float = knob(0.1, "DPO temperature beta", min=0.0)
    rpo_alpha: float = knob(1.0, "weight of the chosen response's NLL beside the DPO loss (RPO; 1.0 keeps the "
                                 "likelihood of correct answers from falling; 0 = plain DPO)", min=0.0)
    lr: float = knob(5e-5, "AdamW learning rate", min=0.0)
    epochs: int = knob(1, "passes over the pairs", min=1)
    batch_size: int = knob(32, "pairs per optimiser step", min=1)
    grad_clip: float = knob(1.0, "max gradient norm (0 = off)", min=0.0)
    samples_per_prompt: int = knob(8, "G when pairs are sampled fresh from the model", min=2)
    sample_prompts: int = knob(1000, "train prompts sampled for fresh pairs", min=1)
    temperature: float = knob(1.0, "sampling temperature for fresh pairs", min=0.0)
    eval_size: int = knob(400, "held-out prompts scored before and after", min=1)


@dataclass(frozen=True)
class Config:
    seed: int = knob(0, "seed for torch, python and numpy")
    output_dir: str = knob("", "where checkpoints, metrics, the archive and the final model go; empty = a new "
                               "runs/<command>-<UTC time> for each run. A named directory that already holds a run "
                               "is refused unless --resume or --overwrite")
    num_threads: int = knob(1, "torch intra-op threads (1 is fastest on a busy 2-core machine)", min=1)
    model: ModelConfig = knob(default_factory=ModelConfig, help="the policy model")
    tasks: TaskConfig = knob(default_factory=TaskConfig, help="the procedural tasks")
    sft: SFTConfig = knob(default_factory=SFTConfig, help="supervised warm start")
    grpo: GRPOConfig = knob(default_factory=GRPOConfig, help="GRPO training")
    ppo: PPOConfig = knob(default_factory=PPOConfig, help="PPO training (critic + GAE)")
    prm: PRMTrainConfig = knob(default_factory=PRMTrainConfig, help="the tiny process reward model")
    dpo: DPOConfig = knob(default_factory=DPOConfig, help="DPO training on verified pairs")
