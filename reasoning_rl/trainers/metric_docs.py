"""The reference of every metric the trainers write to `metrics.jsonl` (and TensorBoard).

`METRICS` is the one list: name, unit, which trainers write it, and what it means. `docs/metrics.md`
is generated from it (`python -m reasoning_rl.trainers.metric_docs > docs/metrics.md`), and the tests check
both that the file is up to date and that every key a real GRPO or PPO run writes is listed here,
so a new metric cannot ship undocumented.

Not here: the metrics that `train dpo` prints (TRL's names: `rewards/margins`, ...), which are
documented with the DPO trainer.
"""
from __future__ import annotations

from typing import NamedTuple


class Metric(NamedTuple):
    name: str
    unit: str
    trainers: str  # "grpo", "ppo", "distill" or several (distill runs GRPO's update: "grpo" ones too)
    meaning: str


BOTH = "grpo, ppo, distill"  # the loop's own metrics: every RL trainer writes them
METRICS: tuple[Metric, ...] = (
    Metric("step", "round", BOTH, "the training round (0 = the evaluation before the first update)"),
    # rewards and verification
    Metric("reward/mean", "reward", BOTH, "mean combined reward over this round's scored samples"),
    Metric("reward/std", "reward", BOTH, "standard deviation of that reward"),
    Metric("reward/term/<verifier>", "score", BOTH, "mean score of one reward term (tasks.reward) over the samples it "
                                                    "scored this round, whatever its weight"),
    Metric("reward/broken/<verifier>", "fraction", BOTH, "share of the samples a reward term other than the outcome "
                                                         "scored (a format rule, a plugin's) that did not pass it"),
    Metric("advantage/term/<verifier>/mean", "score", "grpo, distill", "grpo.reward_normalization=per_term: mean score "
           "of one weighted term over the round's samples it scored (`overlong`: the soft overlong penalty)"),
    Metric("advantage/term/<verifier>/spread", "score", "grpo, distill", "per_term: that term's standard deviation "
           "within its groups, averaged over the groups (0: the term tells no sample of a group from another)"),
    Metric("advantage/term/<verifier>/share", "advantage", "grpo, distill", "per_term: mean magnitude of the term's "
           "weighted share of each sample's advantage (before the batch normalisation)"),
    Metric("verify/masked", "samples", BOTH,
           "samples whose outcome verdict was masked (TIMEOUT, ERROR, ABSTAIN): left out of the update, never 0"),
    Metric("train/samples", "samples", BOTH, "samples that entered the update this round"),
    Metric("frac_reward_zero_std", "fraction", BOTH, "groups whose rewards are all equal (no GRPO signal)"),
    # groups and curriculum
    Metric("groups/pct_mixed", "fraction", BOTH, "groups with at least one pass and one fail"),
    Metric("groups/pct_all_pass", "fraction", BOTH, "groups where every scored sample passed"),
    Metric("groups/pct_all_fail", "fraction", BOTH, "groups where every scored sample failed"),
    Metric("groups/pct_unscored", "fraction", BOTH, "groups with no scored sample (all masked)"),
    Metric("curriculum/yield", "fraction", BOTH, "share of generated groups kept by the group filter"),
    Metric("curriculum/generated_groups", "groups", BOTH, "groups generated to fill this round's batch"),
    Metric("curriculum/extra_generation_rounds", "rounds", BOTH,
           "extra generation rounds needed because too few groups were mixed"),
    Metric("curriculum/batch_full", "0/1", BOTH, "1 when the round's batch reached prompts_per_step groups"),
    Metric("curriculum/retired", "prompts", BOTH, "prompts the curriculum ledger has retired so far (no longer sampled)"),
    # the update
    Metric("loss/policy", "loss", BOTH, "the policy (clipped surrogate) loss, averaged over the round's minibatches"),
    Metric("loss/value", "loss", "ppo", "the critic's (clipped) value loss"),
    Metric("value/mean", "return", "ppo", "mean critic value over response tokens"),
    Metric("value/clipfrac", "fraction", "ppo", "share of value predictions whose clipped term was used"),
    Metric("ratio/mean", "ratio", BOTH, "mean importance ratio pi_theta / pi_old over response tokens"),
    Metric("ratio/max", "ratio", BOTH, "largest such ratio"),
    Metric("clip_ratio/low", "fraction", BOTH, "tokens with ratio < 1 - eps_low and a negative advantage (clipped)"),
    Metric("clip_ratio/high", "fraction", BOTH, "tokens with ratio > 1 + eps_high and a positive advantage (clipped)"),
    Metric("clip_ratio/region", "fraction", BOTH, "tokens clipped on either side (low or high)"),
    Metric("approx_kl", "nats/token", BOTH, "k3 estimate of KL(pi_old || pi_theta) over response tokens"),
    Metric("kl", "nats/token", BOTH, "estimate of KL to the reference policy when beta > 0 (GRPO: the "
           "kl_estimator's, in the loss; PPO: k1 of KL(pi_old || pi_ref) when the batch is made)"),
    Metric("kl_coef", "coefficient", "ppo", "the KL coefficient in force (changes under the adaptive controller)"),
    Metric("entropy", "nats/token", BOTH, "policy entropy at the sampled states (GRPO, distill: of the rows the update "
           "ran, see train/zero_advantage_rows)"),
    Metric("train/zero_advantage_rows", "fraction", "grpo, distill", "rows of the update's minibatches left out of "
           "its passes: zero advantage on every token and nothing else in the loss, so a zero gradient "
           "(grpo.skip_zero_advantage)"),
    Metric("train/passes", "passes", BOTH, "forward and backward passes (micro-batches) a minibatch "
           "ran, mean over the update's minibatches (grpo.length_buckets or grpo.micro_batch_tokens; "
           "ppo.micro_batch_size or ppo.micro_batch_tokens)"),
    Metric("train/largest_pass", "tokens", BOTH, "padded tokens of a minibatch's largest pass, rows x "
           "(longest prompt + longest completion): what sets the update's memory; mean over the minibatches"),
    Metric("grad_norm", "norm", BOTH, "policy gradient norm before clipping"),
    Metric("grad_norm/critic", "norm", "ppo", "critic gradient norm before clipping"),
    # completions and rollout
    Metric("completions/mean_length", "tokens", BOTH, "mean generated completion length"),
    Metric("completions/clipped_ratio", "fraction", BOTH, "completions cut at generation.max_tokens (no EOS)"),
    Metric("rollout/logprob_mismatch_mean", "nats/token", BOTH,
           "mean |log p_engine - log p_trainer| over sampled tokens (0 when the trainer samples)"),
    Metric("rollout/logprob_mismatch_max", "nats/token", BOTH, "largest such difference"),
    Metric("rollout/staleness", "updates", BOTH, "how many updates old the sampling weights were, mean over the "
           "round's samples (0 = on-policy; max_staleness and push_every set it)"),
    Metric("rollout/staleness_max", "updates", BOTH, "the stalest sample of the round"),
    Metric("rollout/mismatch_kl", "nats/token", BOTH, "k3 estimate of KL(pi_engine || pi_old) over the sampled tokens: "
           "how far the engine's log-probs are from the trainer's (rollout_correction not none)"),
    Metric("rollout/ratio_outside", "fraction", BOTH, "share of the sampled tokens whose ratio pi_trainer / pi_engine "
           "lies outside [mismatch_low, mismatch_high] (0.9, 1.1): how many tokens a correction touches, which the "
           "mean KL hides; an alert when it jumps (monitor.mismatch_jump_max)"),
    Metric("rollout/ratio_tokens", "tokens", BOTH, "the sampled tokens the engine and the trainer were compared on"),
    Metric("rollout/is_truncated", "fraction", BOTH, "tokens (token_tis) or sequences (seq_tis) whose importance "
           "weight was cut to is_max"),
    Metric("rollout/is_masked", "fraction", BOTH, "tokens or sequences the mask modes (token_mis, seq_mis, icepop, "
           "geo_mask) left out of the loss"),
    Metric("rollout/is_weight_mean", "weight", BOTH, "mean rollout-correction weight over the tokens (sequences) "
           "it applies to"),
    Metric("rollout/is_weight_min", "weight", BOTH, "smallest such weight"),
    Metric("rollout/is_weight_max", "weight", BOTH, "largest such weight (never above is_max)"),
    Metric("monitor/disagreement", "fraction", BOTH, "share of a sample of this round's passes that the second "
           "opinion (monitor.second_opinion) does not pass"),
    Metric("monitor/disagreement_mean", "fraction", BOTH, "the share over the last monitor.window rounds, "
           "pooled (each re-checked pass counts once; what the alert reads, with its binomial test)"),
    Metric("monitor/second_opinion_masked", "samples", BOTH, "re-checked passes the second opinion masked"),
    Metric("monitor/pass_share/<category>", "fraction", BOTH, "share of this round's passes won one way (the math "
           "verifier's extraction path: boxed, last number, ...)"),
    Metric("monitor/masked/<status>", "fraction", BOTH, "share of this round's samples whose outcome was masked "
           "with that status"),
    Metric("monitor/ratio_outside_jump", "fraction", BOTH, "rollout/ratio_outside this round minus its pooled share "
           "over the window before (an engine that is not the trainer)"),
    Metric("monitor/length_drift", "fraction", BOTH, "relative change of the mean completion length over "
           "monitor.window rounds"),
    Metric("monitor/term_drift/<verifier>", "score", BOTH, "change of a non-outcome reward term's mean score over "
           "monitor.window rounds"),
    Metric("monitor/reward_heldout_gap", "reward", BOTH, "rise of the training reward minus rise of held-out "
           "accuracy over monitor.window evaluations"),
    Metric("monitor/alerts", "alerts", BOTH, "alerts raised this round (each an ALERT line in the log)"),
    Metric("reward/overlong", "reward", "grpo", "mean soft overlong penalty added to the rewards (grpo.overlong_buffer)"),
    Metric("entropy/coef", "coefficient", "grpo", "the entropy bonus coefficient this round (adapted towards "
           "grpo.entropy_target)"),
    Metric("throughput/tokens_per_s", "tokens/s", BOTH, "generated tokens per second of rollout time"),
    # code verification
    Metric("sandbox/programs", "programs", BOTH, "programs verified this round (computed, not cached)"),
    Metric("sandbox/level", "level", BOTH, "the weakest sandbox isolation level of the round's programs: 2 full "
           "(root, cgroups), 1 rootless (user namespaces, rlimits), 0 none (weak isolation allowed)"),
    Metric("sandbox/runs", "runs", BOTH, "sandbox runs this round (one per test run)"),
    Metric("sandbox/wall_s", "seconds", BOTH, "wall time spent in the sandbox this round"),
    Metric("sandbox/leftover_processes", "processes", BOTH,
           "processes left in the sandbox's control groups after the round (should be 0)"),
    # multi-turn episodes (grpo.environment, ppo.environment)
    Metric("tools/broken_call", "fraction", BOTH, "episodes with a turn that opened a tool call the environment "
                                                  "could not read (an unclosed <<, a ```python or <tool_call> "
                                                  "without its close): the tool-call format broken"),
    Metric("tools/calls_per_sample", "calls", BOTH, "tool calls per episode this round"),
    Metric("tools/program_error_rate", "fraction", BOTH, "calls whose program raised or ran past a limit (shown to "
                                                          "the model as a REPL would)"),
    Metric("tools/failure_rate", "fraction", BOTH, "episodes whose environment itself failed (masked ERROR)"),
    Metric("tools/turns_per_sample", "turns", BOTH, "model segments per episode"),
    Metric("tools/truncated", "fraction", BOTH, "episodes that reached max_episode_tokens (finish 'length')"),
    Metric("tools/void", "fraction", "grpo", "episodes of the batch that ended on a void turn (no tool call, no "
                                             "answer the outcome verifier read); left out of the loss with "
                                             "grpo.void_turns filter"),
    Metric("tools/template_mismatch", "fraction", BOTH, "episodes whose ids are not apply_chat_template of their "
                                                          "whole conversation (tool_format chat; the archive's "
                                                          "last turn gives the first differing position)"),
    Metric("time/tools", "seconds", BOTH, "tool time this round, summed over calls (they run concurrently)"),
    # distillation (train distill; it writes GRPO's update metrics too)
    Metric("distill/reverse_kl", "nats", "distill", "mean over the batch's model tokens of log p_S - log p_T of the "
                                                    "sampled token: the single-sample estimate of KL(student || "
                                                    "teacher) per token (0 when they agree)"),
    Metric("distill/teacher_logprob", "nats", "distill", "the teacher's mean log-prob of the student's sampled "
                                                         "tokens, at the rollout's temperature"),
    Metric("distill/samples", "samples", "distill", "samples the distillation batch trains on (every sample of the "
                                                    "round; with reward_weight > 0, those the verifier scored)"),
    Metric("distill/outcome_advantage_abs", "advantage", "distill", "with reward_weight > 0: mean |outcome "
                                                                    "advantage| of the batch, before the weight"),
    Metric("distill/divergence", "nats", "distill", "loss jsd or topk_forward_kl: the divergence, token mean over "
                                                    "the minibatch's model tokens (what loss/policy reports then)"),
    # time
    Metric("time/rollout", "seconds", BOTH, "generation time this round"),
    Metric("fleet/<i>/share", "fraction", BOTH, "with several engine_url servers: server i's share of the round's last "
                                                "generation call (prompts dealt in turn; a group never split)"),
    Metric("fleet/<i>/latency_s", "seconds", BOTH, "with several engine_url servers: server i's mean seconds per request "
                                                   "in the round's last generation call"),
    Metric("time/verify", "seconds", BOTH, "verification time on the round's critical path"),
    Metric("time/verify_busy", "seconds", BOTH,
           "all verification time, also what overlapped generation (rollout_chunks > 1)"),
    Metric("time/update", "seconds", BOTH, "time of the optimiser update"),
    Metric("time/step", "seconds", BOTH, "wall time of the whole round"),
    Metric("time/push", "seconds", BOTH, "time to push weights to the engine (engines worker, vllm and openai), in "
           "the round the push was for"),
    Metric("time/wait", "seconds", BOTH, "how long the step waited for its round: all of its making when "
           "synchronous, what the previous update did not hide with max_staleness >= 1"),
    # evaluation
    Metric("eval/accuracy", "fraction", BOTH, "held-out accuracy, greedy, on eval.size prompts never trained on"),
    Metric("eval/parseable", "fraction", BOTH, "held-out completions with an answer the outcome verifier could read "
                                               "(the format part of eval/accuracy)"),
    Metric("eval/accuracy_parseable", "fraction", BOTH, "held-out accuracy among completions with a parseable "
                                                        "answer (the correctness part)"),
    Metric("eval/stated", "fraction", BOTH, "held-out completions that state their final answer in an answer form "
                                            "(a box, ####, an answer phrase; the math verifier's states_answer), "
                                            "not read into them by a fallback such as the last number"),
    Metric("eval/accuracy_stated", "fraction", BOTH, "held-out accuracy among completions that state their answer"),
    Metric("eval/tool_calls", "calls", BOTH, "with an environment: tool calls per held-out episode (greedy)"),
    Metric("eval/tool_ok", "fraction", BOTH, "with an environment, where any held-out episode called: the share of "
                                           "calls that ran without error (program or environment)"),
    Metric("eval/answer_is_tool_output", "fraction", BOTH, "with an environment: among held-out episodes with a clean "
                                                           "tool output, the share whose answer equals the last one "
                                                           "(the outcome verifier's equality)"),
    Metric("eval/truncated", "fraction", BOTH, "held-out completions cut at generation.max_tokens (no end of turn); "
                                               "with eval.truncated fail (the default) none of them is a pass"),
)

DOCUMENTED = frozenset(m.name for m in METRICS)


def undocumented(keys) -> list[str]:
    """The keys of a metrics line that `METRICS` does not list (a name with `<...>` covers every key it prefixes)."""
    prefixes = tuple(m.name.split("<")[0] for m in METRICS if "<" in m.name)
    return sorted(k for k in set(keys) - DOCUMENTED if not k.startswith(prefixes))


def render_markdown() -> str:
    lines = ["# Metrics reference", "",
             "Every key the GRPO, PPO and distillation trainers write to `metrics.jsonl` (one JSON line per round) and to "
             "TensorBoard. Generated from `reasoning_rl/trainers/metric_docs.py` by "
             "`python -m reasoning_rl.trainers.metric_docs > docs/metrics.md`; a test fails when a run writes a key "
             "missing here, or when this file is older than the list.", "",
             "| metric | unit | trainers | meaning |", "| --- | --- | --- | --- |"]
    lines += [f"| `{m.name}` | {m.unit} | {m.trainers} | {m.meaning} |" for m in METRICS]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_markdown(), end="")
