"""The RL sections of the run configuration: `RLConfig` (what every RL algorithm has) and the `grpo` and `ppo`
sections built on it. Part of `config/sections.py` (which re-exports them and holds the other sections and `Config`): one
concept per file, every knob still declared once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from .knobs import ConfigError, knob, redefault


@dataclass(frozen=True)
class RLConfig:
    """What every RL algorithm has, under one name each (TRL's name in the help where it differs).

    GRPO and PPO sections are this plus their own knobs; each may recommend other defaults."""
    steps: int = knob(60, "optimiser rounds (each: sample, verify, filter, update); TRL max_steps", min=1)
    prompts_per_step: int = knob(32, "prompts per round (B); TRL generation_batch_size / num_generations", min=1)
    group_size: int = knob(8, "completions per prompt (G); TRL num_generations. GRPO needs >= 2: with 8 a group is "
                              "likely to be mixed for pass rates between 0.1 and 0.9", min=1)
    lr: float = knob(1e-4, "policy AdamW learning rate, constant after warm-up; TRL learning_rate. The tiny model "
                           "destabilises an order of magnitude higher", min=0.0)
    warmup_steps: int = knob(5, "linear learning-rate warm-up; TRL warmup_steps", min=0)
    eps_low: float = knob(0.2, "PPO clip below 1; TRL epsilon", min=0.0, max=1.0)
    eps_high: float = knob(0.28, "PPO clip above 1 (DAPO clip-higher); TRL epsilon_high", min=0.0)
    beta: float = knob(0.0, "KL-to-reference coefficient (0 = no reference model loaded); TRL beta", min=0.0)
    kl_estimator: Literal["k1", "k2", "k3", "k3_clamped"] = knob(
        "k3", "estimator of the KL term in the loss (docs/algorithms.md §kl); k3_clamped = k3 with verl's clamps")
    num_iterations: int = knob(1, "optimisation epochs over each round's batch (mu); TRL num_iterations", min=1)
    minibatch_size: int = knob(128, "sequences per optimiser step; TRL per_device_train_batch_size x "
                                    "gradient_accumulation_steps", min=1)
    grad_clip: float = knob(1.0, "max gradient norm per model (0 = off); TRL max_grad_norm", min=0.0)
    bf16: bool = knob(False, "autocast the update's forward passes to bfloat16 where the device supports it; TRL bf16")
    share_prompt_pass: Literal["auto", "on", "off"] = knob(
        "auto", "the update's forward passes run each group's prompt once and its samples after it (its keys and "
                "values copied to each; the same log-probs and gradients up to float noise, for less compute the "
                "longer the prompt); auto = on, except for the embedded tiny model, whose published trajectory was "
                "computed without it and whose prompts are a few characters")
    mask_truncated_completions: bool = knob(False, "leave completions that hit generation.max_tokens out of the loss; "
                                                   "TRL mask_truncated_completions")
    format_weight: float = knob(0.0, "weight of the task's format rule in the reward (0 = logged only)")
    sampler: Literal["uniform", "mixed_band", "easy_first"] = knob(
        "mixed_band", "how prompts are drawn: uniformly; weighted towards pass rates likely to give mixed groups "
                      "(mixed_band); or easy_first: mixed_band within the easiest prompts by tasks.difficulty, the "
                      "window doubling each time its pooled pass rate reaches easy_widen_at (docs/algorithms.md "
                      "§curriculum)")
    easy_start: float = knob(0.05, "easy_first: the share of the train prompts (easiest first) drawn from at the start",
                             min=0.0, max=1.0)
    easy_widen_at: float = knob(0.3, "easy_first: the window doubles once its prompts' pooled pass rate reaches this "
                                     "(after at least group_size attempts a prompt of it)", min=0.0, max=1.0)
    filter_mixed: bool = knob(True, "keep only groups with a pass and a fail (DAPO dynamic sampling)")
    max_refill_rounds: int = knob(2, "extra generation rounds to refill a filtered batch", min=0)
    refill_seconds: float = knob(0.0, "a round's refill stops once it has spent this many seconds as well (0 = rounds "
                                      "alone: max_refill_rounds); with many refill rounds allowed, a time budget for "
                                      "finding mixed groups on data the model rarely solves", min=0.0)
    retire_after: int = knob(0, "retire a prompt after this many all-pass groups in a row (0 = never)", min=0)
    train_prompts: int = knob(0, "RL on only the first N train prompts (0 = all); small N for smoke tests", min=0)
    eval_every: int = knob(10, "held-out greedy accuracy every N steps (eval.size prompts; 0 = no periodic "
                               "evaluation); TRL eval_steps. Each evaluation costs eval.size greedy completions: on a "
                               "CPU with a real model that is minutes, often more than a round", min=0)
    eval_at_start: bool = knob(True, "evaluate held-out accuracy before the first round (step 0)")
    eval_at_end: bool = knob(True, "evaluate held-out accuracy after the last round, whatever eval_every says")
    checkpoint_every: int = knob(25, "save a resumable checkpoint every N steps (0 = only the final model); TRL "
                                     "save_steps", min=0)
    verifier_workers: int = knob(2, "verifier worker processes", min=1)
    verifier_backend: Literal["process", "ray"] = knob("process", "process (local workers) | ray (Ray actors; "
                                                       "RAY_ADDRESS joins a cluster)")
    verifier_load_timeout_s: float = knob(60.0, "seconds a verifier worker may take to load a verifier before its "
                                               "first call there (a plugin's import, a fresh worker's start); not "
                                               "counted in the call's own time; a load past it is TIMEOUT (masked)",
                                          min=0.001)
    engine: Literal["hf", "worker", "vllm", "openai"] = knob(
        "hf", "rollout engine: hf (transformers, the CPU default) | worker (hf in a generation process of its own, "
              "weights pushed each round; what max_staleness >= 1 needs on one machine) | vllm (needs vLLM "
              "importable, e.g. run under .venv-vllm; weights pushed in place) | openai (a `vllm serve` server at "
              "engine_url; weights pushed through weights_dir); TRL use_vllm / vllm_mode")
    max_staleness: int = knob(0, "async rounds: generate round t+k while update t runs, from weights k updates old "
                                 "(0 = the synchronous loop). Needs engine worker or openai; the ratio is taken "
                                 "against the trainer's own pi_old and rollout_correction weighs the engine's samples "
                                 "back (docs/async.md); prime-rl max_off_policy_steps, open-instruct async_steps. "
                                 "1 is the usual choice", min=0)
    generation_threads: int = knob(0, "engine=worker: torch threads of the generation process (0 = num_threads)",
                                   min=0)
    engine_url: str = knob("", "engine=openai: the server's OpenAI base URL, e.g. http://host:8000/v1; several separated "
                               "by commas (a fleet: each round's groups dealt to them in turn, a group never split, "
                               "weights pushed to all)")
    request_timeout_s: float = knob(120.0, "engine=openai: seconds each try of a sampling request may take (3 tries); "
                                           "past the last, the run stops with one line naming the server", min=1.0)
    push_timeout_s: float = knob(0.0, "engine=openai: seconds a weight push to a server may take; 0 = sized to the "
                                      "model (rollout/openai.py push_deadline: a minute and more per GiB written). "
                                      "Past it, the run stops with one line naming the server; the last checkpoint "
                                      "stays valid", min=0.0)
    engine_model: str = knob("", "engine=openai: the served model name (vllm serve's --served-model-name, or its path)")
    weights_dir: str = knob("", "engine=openai: a folder the server can also read, for weight pushes "
                                "(empty = output_dir/weights; the server must run with VLLM_SERVER_DEV_MODE=1)")
    push_every: int = knob(1, "worker/vllm/openai engines: push the trainer's weights every N rounds; samples then come "
                              "from weights up to N-1 updates old (rollout_correction weighs them back)", min=1)
    rollout_correction: Literal["auto", "none", "token_tis", "seq_tis", "token_mis", "seq_mis", "icepop",
                                "geo_mask"] = knob(
        "auto", "importance weights for samples whose engine log-probs differ from the trainer's (docs/algorithms.md "
                "§rollout-correction): auto = token_tis for engines worker, vllm and openai, none for hf (the sampler is the "
                "trainer). Not none: the ratio is taken against the trainer's own pi_old (one extra forward a round); "
                "TRL vllm_importance_sampling_correction / _mode")
    is_min: float = knob(0.5, "lower bound C_min of the mask modes (token_mis, seq_mis, icepop, geo_mask); TRL "
                              "vllm_importance_sampling_clip_min", min=0.0)
    is_max: float = knob(2.0, "upper bound C_max: the truncation of *_tis, the mask of the others; TRL "
                              "vllm_importance_sampling_clip_max", min=0.0)
    mismatch_low: float = knob(0.9, "rollout/ratio_outside counts the sampled tokens whose ratio pi_trainer / "
                                    "pi_engine lies below this ...", min=0.0, max=1.0)
    mismatch_high: float = knob(1.1, "... or above this (an engine that is not the trainer: the share of tokens a "
                                     "correction would touch, beside rollout/mismatch_kl)", min=1.0)
    rollout_chunks: int = knob(1, "generate each round in this many chunks and verify each chunk in the background "
                                  "while the next is generated: > 1 hides slow verification (code tasks) behind "
                                  "generation, at the cost of smaller generation batches", min=1)
    control: Literal["", "shuffled_rewards"] = knob(
        "", "an ablation, not for training: shuffled_rewards gives every sample the verdicts of a random sample of "
            "its round (same reward distribution, no signal; the archive then holds the shuffled verdicts)")
    environment: str = knob("", "multi-turn episodes with this environment (docs/tools.md; python: a sandboxed "
                                "Python interpreter the model calls with a ```python block); empty = one completion "
                                "per sample. Needs engine hf, vllm or openai (segments sampled from token ids; with "
                                "openai also in async rounds, max_staleness)")
    max_turns: int = knob(4, "with environment: model segments per episode", min=1)
    max_tool_calls: int = knob(3, "with environment: tool calls per episode (a call past it ends the episode, not run)",
                               min=0)
    max_episode_tokens: int = knob(512, "with environment: tokens after the prompt, the model's and the observations' "
                                        "together; an episode reaching it is truncated (finish 'length') and ends",
                                   min=1)
    tool_wall_s: float = knob(5.0, "with environment python: wall and CPU seconds of each tool call", min=0.1)
    tool_packages: tuple[str, ...] = knob(("default",), "with environment python: third-party packages the code may "
                                                       "import, read-only (and what they require); 'default' = numpy "
                                                       "and sympy, those tool_site has; empty = none")
    tool_site: str = knob("", "with environment python: the environment tool_packages come from (a virtual environment "
                              "or site-packages folder); empty = the one running reasoning-rl")
    tool_format: Literal["text", "chat"] = knob(
        "text", "with environment: how an observation joins the episode. text: appended to the model's turn as it "
                "is (any model); chat: the model ends its turn, the observation comes as the chat template's tool "
                "message followed by the next assistant header (needs the chat template), and each episode's ids "
                "are checked against apply_chat_template of the whole conversation (tools/template_mismatch)")

    def __post_init__(self) -> None:  # cross-field rules, checked when the config is built, not mid-run
        urls = self.engine_url.replace(",", " ").split()
        bad = [u for u in urls if not u.startswith(("http://", "https://"))]
        if bad:
            raise ConfigError(f"{self.SECTION}.engine_url: {bad[0]!r} is not an http:// or https:// URL")
        if len(set(urls)) < len(urls):
            raise ConfigError(f"{self.SECTION}.engine_url: a server is named twice ({self.engine_url!r})")
        if self.engine == "openai" and not (self.engine_url and self.engine_model):
            raise ConfigError(f"{self.SECTION}.engine=openai needs {self.SECTION}.engine_url and "
                              f"{self.SECTION}.engine_model (got {self.engine_url!r}, {self.engine_model!r})")
        if self.max_staleness and self.engine not in ("worker", "openai"):
            raise ConfigError(f"{self.SECTION}.max_staleness={self.max_staleness} needs an engine with weights of its "
                              f"own that runs beside the update: {self.SECTION}.engine=worker (one machine) or "
                              f"openai (a vLLM server); got engine={self.engine!r}")
        if self.max_staleness and self.push_every != 1:
            raise ConfigError(f"{self.SECTION}.push_every={self.push_every} with max_staleness={self.max_staleness}: "
                              "max_staleness already sets how old the sampling weights are; leave push_every at 1")
        if self.environment:  # whether the name is registered is checked before loading (check_environment)
            if self.engine == "worker":
                raise ConfigError(f"{self.SECTION}.environment={self.environment!r} runs its episodes on engine hf, "
                                  f"vllm or openai; got {self.SECTION}.engine={self.engine!r}")

    SECTION: ClassVar[str] = "rl"

    @property
    def correction(self) -> str:
        """rollout_correction with auto resolved: token_tis where the sampler is not the trainer, else none."""
        if self.rollout_correction != "auto":
            return self.rollout_correction
        return "none" if self.engine == "hf" else "token_tis"


@dataclass(frozen=True)
class GRPOConfig(RLConfig):
    loss_type: Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo"] = knob(
        "dapo", "how token losses aggregate (TRL's names and meanings; docs/algorithms.md §aggregation); cispo = "
                "CISPO's clipped importance weight times log pi (§cispo; eps_high is its cap, e.g. 5)")
    ratio_level: Literal["token", "sequence"] = knob("token", "token ratios, or one length-normalised ratio per "
                                                              "sequence: GSPO (§gspo; the paper's eps is 3e-4 low, 4e-4 high); TRL "
                                                              "importance_sampling_level")
    advantage: Literal["grpo", "dr_grpo", "rloo", "process", "pass_at_k"] = knob(
        "grpo", "advantage estimator (docs/algorithms.md §grpo-advantages); process = per-step PRM rewards, "
                "needs prm_model; pass_at_k = the pass@k objective on the outcome (§pass-at-k)")
    pass_k: int = knob(1, "k of advantage=pass_at_k (1 = grpo); at most group_size", min=1)
    overlong_buffer: int = knob(0, "DAPO soft overlong punishment: a linear penalty over the last N tokens before "
                                   "generation.max_tokens (§overlong; 0 = off); logged as reward/overlong", min=0)
    overlong_penalty: float = knob(1.0, "the penalty at generation.max_tokens", min=0.0)
    entropy_coef: float = knob(0.0, "entropy bonus coefficient (the loss gains -coef * H; §entropy)", min=0.0)
    entropy_target: float = knob(0.0, "with entropy_coef: adapt the coefficient towards this entropy per token "
                                      "(0 = a fixed coefficient)", min=0.0)
    entropy_coef_lr: float = knob(0.01, "step size of the coefficient's adaptation towards entropy_target", min=0.0)
    scale_rewards: Literal["group", "batch", "none"] = knob("group", "the std that divides grpo advantages; TRL "
                                                            "scale_rewards")
    reward_normalization: Literal["sum", "per_term"] = knob(
        "sum", "how several reward terms (tasks.reward) become one advantage: sum = their weighted sum normalised in "
               "its group (a sample with a masked weighted term is left out); per_term = each term normalised within "
               "its group on the samples it scored, then weighted and summed (GDPO; TRL "
               "multi_objective_aggregation=normalize_then_sum): a term with a larger spread no longer drowns the "
               "others. docs/algorithms.md §per-term")
    per_term_batch_norm: bool = knob(True, "reward_normalization=per_term: normalise the summed advantage over the "
                                           "batch afterwards (GDPO's and TRL's last step; false keeps the sum)")
    prm_model: str = knob("", "path of a PRM (e.g. runs/prm/final from `train prm`): its step scores are logged, "
                              "and with advantage=process they are the step rewards")
    length_buckets: int = knob(4, "forward/backward each minibatch as up to this many micro-batches of similar "
                                  "length, each padded only to its own longest (gradients accumulate to the same "
                                  "update); 1 = one padded batch. Fewer: larger products, faster where memory "
                                  "allows. Rows left out (skip_zero_advantage) run as fewer micro-batches, each of "
                                  "about minibatch_size / length_buckets rows", min=1)
    micro_batch_tokens: int = knob(0, "cut each minibatch into micro-batches by size instead of by count: rows in "
                                      "length order, each micro-batch holding at most this many padded tokens (its "
                                      "rows x its longest prompt + completion; a group whose prompt runs once stays "
                                      "whole, and a row or such group longer than this runs alone); verl "
                                      "use_dynamic_bsz with ppo_max_token_len_per_gpu. 0 = off (length_buckets "
                                      "decides); when set, length_buckets is not read. train/passes and "
                                      "train/largest_pass show what either cut made", min=0)
    skip_zero_advantage: bool = knob(
        True, "the update leaves out of its forward and backward passes the rows whose advantage is zero on every "
              "token (a group whose samples all scored the same), when nothing else in the loss reaches them (beta = "
              "0, no entropy bonus): their gradient is exactly zero, and they still count in the token-mean's "
              "denominator, so the update is the same. The step's entropy, ratio and clip metrics are then over the "
              "rows it ran; train/zero_advantage_rows is the share left out. false runs every row (TRL, verl)")
    void_turns: Literal["keep", "filter"] = knob(
        "keep", "with environment: an episode that ends on a void turn (no tool call, and no answer the outcome "
                "verifier can read) stays in the loss (keep) or is left out of it, its group's advantages "
                "unchanged (filter; SimpleTIR's trajectory filter). tools/void counts them either way")

    SECTION: ClassVar[str] = "grpo"

    @property
    def compares_within_groups(self) -> bool:
        """Whether the advantage compares a sample with its group (GRPO's always; distillation's only through the
        outcome term)."""
        return True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.group_size < 2 and self.compares_within_groups:
            raise ConfigError(f"{self.SECTION}.group_size: value {self.group_size} is below 2 (a group needs two "
                              "samples to compare)")
        if self.advantage == "process" and not self.prm_model:
            raise ConfigError(f"{self.SECTION}.advantage=process needs {self.SECTION}.prm_model (a PRM path; "
                              "`reasoning-rl train prm` makes one)")
        if self.advantage == "pass_at_k" and self.pass_k > self.group_size:
            raise ConfigError(f"{self.SECTION}.pass_k: value {self.pass_k} is above {self.SECTION}.group_size "
                              f"({self.group_size})")
        if self.reward_normalization == "per_term" and self.advantage in ("process", "pass_at_k"):
            scores = "the PRM's steps" if self.advantage == "process" else "the outcome alone"
            raise ConfigError(f"{self.SECTION}.reward_normalization=per_term normalises reward terms within groups; "
                              f"{self.SECTION}.advantage={self.advantage} scores {scores}")
        if self.loss_type == "cispo" and self.ratio_level == "sequence":
            raise ConfigError(f"{self.SECTION}.loss_type=cispo weighs each token: {self.SECTION}.ratio_level must be "
                              "token")


@dataclass(frozen=True)
class DistillConfig(GRPOConfig):
    """On-policy distillation (docs/algorithms.md §distill): the student samples groups as GRPO does; a frozen teacher
    scores every sampled token; the per-token advantage is the negative reverse KL (or a dense divergence is the
    loss), optionally plus the verifier's outcome advantage. GRPO's knobs, with the defaults distillation calls for."""
    # every sample carries a dense signal: no group needs to be mixed, and no prompt is drawn for its pass rate
    filter_mixed: bool = redefault(RLConfig, "filter_mixed", False)
    sampler: Literal["uniform", "mixed_band", "easy_first"] = redefault(RLConfig, "sampler", "uniform")
    group_size: int = redefault(RLConfig, "group_size", 4)
    loss_type: Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo"] = redefault(GRPOConfig, "loss_type", "dapo")
    teacher: str = knob("", "the teacher: a model name, Hugging Face folder or .gguf file, as model.name_or_path "
                            "takes; frozen, never trained. TRL teacher_model_name_or_path")
    teacher_gguf_file: str = knob("", "the GGUF file inside distill.teacher when that is a folder of several")
    teacher_device: str = knob("same", "where the teacher runs: same (the student's device), cpu, cuda, cuda:N")
    loss: Literal["reverse_kl", "jsd", "topk_forward_kl"] = knob(
        "reverse_kl", "reverse_kl: the sampled tokens' advantage A_t = log p_T - log p_S, climbed with the clipped "
                      "surrogate (Thinking Machines' on-policy distillation; one teacher log-prob a token); jsd: the "
                      "generalized JSD over the whole vocabulary at every sampled position, as TRL's "
                      "DistillationTrainer (beta: jsd_beta); topk_forward_kl: the forward KL on the teacher's top_k "
                      "tokens (docs/algorithms.md §distill)")
    jsd_beta: float = knob(1.0, "loss=jsd: 0 = forward KL(teacher || student), 1 = reverse KL(student || teacher), "
                                "between = the generalized JSD; TRL DistillationTrainer beta", min=0.0, max=1.0)
    top_k: int = knob(16, "loss=topk_forward_kl: the teacher's most likely tokens the forward KL is taken over",
                      min=1)
    reward_weight: float = knob(0.0, "weight of the verifier's group-normalised outcome advantage added to every "
                                     "token's distillation signal (0 = distillation alone; samples the verifier "
                                     "masked are then left out, never scored 0)", min=0.0)

    SECTION: ClassVar[str] = "distill"

    @property
    def compares_within_groups(self) -> bool:
        return self.reward_weight > 0  # the teacher's signal needs no group: group_size 1 is a plain batch

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.advantage == "process":
            raise ConfigError("distill.advantage=process: the reward term of distillation is an outcome advantage "
                              "(grpo, dr_grpo, rloo, pass_at_k)")
        if self.loss != "reverse_kl" and self.environment:
            raise ConfigError(f"distill.loss={self.loss} scores the whole vocabulary at each position; with "
                              "distill.environment use loss=reverse_kl")


@dataclass(frozen=True)
class PPOConfig(RLConfig):
    # PPO's recommended values for shared knobs: the critic is the baseline, so no groups, filter or mixed sampler
    steps: int = redefault(RLConfig, "steps", 150)
    prompts_per_step: int = redefault(RLConfig, "prompts_per_step", 64)
    group_size: int = redefault(RLConfig, "group_size", 2)
    eps_high: float = redefault(RLConfig, "eps_high", 0.2)
    beta: float = redefault(RLConfig, "beta", 0.02)
    num_iterations: int = redefault(RLConfig, "num_iterations", 2)
    minibatch_size: int = redefault(RLConfig, "minibatch_size", 64)
    sampler: Literal["uniform", "mixed_band", "easy_first"] = redefault(RLConfig, "sampler", "uniform")
    filter_mixed: bool = redefault(RLConfig, "filter_mixed", False)
    eval_every: int = redefault(RLConfig, "eval_every", 25)
    # PPO's own
    critic_lr: float = knob(1e-3, "critic AdamW learning rate (its value head starts at zero)", min=0.0)
    gamma: float = knob(1.0, "GAE discount (1.0 for outcome rewards on short completions)", min=0.0, max=1.0)
    lam: float = knob(0.95, "GAE lambda", min=0.0, max=1.0)
    vf_clip: float = knob(0.2, "value clip range around the old values (0 = unclipped); TRL cliprange_value", min=0.0)
    entropy_coef: float = knob(0.0, "entropy bonus coefficient (the policy loss gains -coef * H, as GRPO's)", min=0.0)
    kl_in_reward: bool = knob(True, "beta's KL as per-token reward shaping (classic RLHF PPO); False = the KL "
                                     "estimator in the loss. Never both")
    adaptive_kl: bool = knob(False, "adapt beta towards kl_target (Ziegler et al. 2019; docs/algorithms.md §kl)")
    kl_target: float = knob(0.05, "target KL per token for the adaptive controller", min=0.0)
    kl_horizon: int = knob(1000, "adaptive controller horizon in steps", min=1)
    micro_batch_size: int = knob(0, "sequences per forward/backward, in the minibatch's order, each pass padded only "
                                    "to its own longest row and weighed by its share of the minibatch's tokens, "
                                    "so gradients accumulate to one padded batch's (0 = the whole minibatch at "
                                    "once)", min=0)
    micro_batch_tokens: int = knob(0, "cut each minibatch into micro-batches by size instead of by count, as "
                                      "grpo.micro_batch_tokens: rows in length order, each pass at most this many "
                                      "padded tokens (rows x its longest prompt + completion; a row longer than this "
                                      "runs alone). 0 = off (micro_batch_size decides); when set, micro_batch_size "
                                      "is not read", min=0)
    whiten_advantages: bool = knob(True, "normalise advantages to zero mean, unit std over the batch's tokens")

    SECTION: ClassVar[str] = "ppo"
