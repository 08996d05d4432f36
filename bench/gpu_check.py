"""The GPU check: learning and device placement on the GPU, then throughput of a 0.5 B-parameter model. One command.

    python bench/gpu_check.py [--out DIR]     on a GPU machine: at most about 8 minutes on one GPU
    python bench/gpu_check.py --tiny          the same steps at a tiny size (any machine; a test runs this form)

Needs only what a bare CUDA image with PyTorch and transformers has (no vLLM, TRL, datasets or math-verify):
  1. the demo's recipe on the device: the tiny model's SFT warm start (fewer steps) and GRPO under the `math`
     verifier, held-out accuracy before and after, and where every parameter lives;
  2. a Qwen2-architecture model of about 0.5 B parameters built from a config (random weights, our
     tokenizer, Qwen2-0.5B's shape) in bfloat16: tokens per second of the hf engine at G=8 samples of B=32
     prompts with 256 new tokens, seconds of one GRPO update over those 256 sequences, peak GPU memory;
  3. one FSDP2 step of that shape over every GPU (bf16 compute, activations recomputed), a forward on whole weights
     and the full state gathered, through reasoning_rl/trainers/sharding.py (torchrun children).
Prints one JSON object (and writes gpu_check.json into --out, or $OUT when set).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Qwen2-0.5B's shape (494 M parameters with its 151,936-entry vocabulary, embeddings tied)
BIG = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
           num_key_value_heads=2, vocab_size=151936)
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=512)


def learning(device: str, tiny: bool, tmp: str) -> dict:
    """SFT then GRPO of the embedded default on `device`: held-out accuracy before and after."""
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.trainers.grpo import train_grpo

    sft_steps, rounds = (40, 3) if tiny else (600, 30)
    over = [f"model.device={device}", f"sft.steps={sft_steps}", f"grpo.steps={rounds}", f"grpo.eval_every={rounds}",
            "grpo.checkpoint_every=0", f"output_dir={tmp}/grpo", "eval.size=200"]
    if tiny:
        over += ["grpo.prompts_per_step=4", "grpo.group_size=4", "grpo.train_prompts=32", "eval.size=16",
                 "model.tiny.num_layers=1", "grpo.filter_mixed=false"]
    os.environ["REASONING_RL_CACHE"] = os.path.join(tmp, "cache")  # a fresh warm start, trained on the device
    cfg = config.load(Config, overrides=over)
    t0 = time.perf_counter()
    history, model, _ = train_grpo(cfg, log=lambda *_: None)
    with open(os.path.join(tmp, "grpo", "metrics.jsonl")) as f:
        acc0 = json.loads(f.readline())["eval/accuracy"]
    devices = sorted({str(p.device) for p in model.parameters()})
    return {"sft_steps": sft_steps, "grpo_rounds": rounds, "heldout_before": acc0,
            "heldout_after": history[-1]["eval/accuracy"], "seconds": round(time.perf_counter() - t0, 1),
            "parameter_devices": devices, "grpo_round_s": round(sum(h["time/step"] for h in history) / len(history), 3)}


def throughput(device: str, tiny: bool) -> dict:
    """hf-engine tokens/s at G x B samples, one GRPO update's seconds, peak memory: a 0.5 B model in bf16."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from reasoning_rl import config
    from reasoning_rl.config.sections import Config, GRPOConfig
    from reasoning_rl.rollout import HFEngine, SamplingConfig
    from reasoning_rl.models.tiny.tokenizer import build_char_tokenizer
    from reasoning_rl.trainers.distributed import Ranks
    from reasoning_rl.trainers.grpo_batch import make_batch, update_minibatch
    import verifiers

    G, B, new = (2, 2, 8) if tiny else (8, 32, 256)
    shape = TINY if tiny else BIG
    tok = build_char_tokenizer()
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**shape, max_position_embeddings=1024, tie_word_embeddings=True,
                                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id))
    model = model.to(device=device, dtype=dtype).eval()
    n_params = sum(p.numel() for p in model.parameters())
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    engine = HFEngine(model, tok, batch_size=G * B)
    prompts = [f"{a}+{a + 7}=" for a in range(B)]
    sampling = SamplingConfig(temperature=1.0, max_tokens=new, seed=0)
    engine.generate(prompts[:2], 2, SamplingConfig(temperature=1.0, max_tokens=4, seed=0))  # warm-up (kernels)
    _sync(device)
    t0 = time.perf_counter()
    groups = engine.generate(prompts, G, sampling)
    _sync(device)
    gen_s = time.perf_counter() - t0
    tokens = sum(len(s.token_ids) for g in groups for s in g.samples)
    reward = verifiers.Reward.single("exact")  # any verdicts will do: random weights never pass
    rng = torch.Generator().manual_seed(0)
    from reasoning_rl.types import Verdict

    groups = [g.__class__(g.prompt_id, g.prompt, g.row, [s.with_verdicts({"exact": Verdict.correct() if torch.rand(
        1, generator=rng).item() < 0.5 else Verdict.incorrect()}) for s in g.samples]) for g in groups]
    gcfg = config.from_dict(GRPOConfig, {"minibatch_size": G * B, "length_buckets": 4, "bf16": True},
                            prefix="grpo")
    batch, _ = make_batch(groups, reward, tok, gcfg, model.device, max_len=new)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    model.train()
    t0 = time.perf_counter()
    opt.zero_grad()
    update_minibatch(model, None, Ranks(), gcfg, Config().generation, batch, torch.arange(len(batch)))
    opt.step()
    _sync(device)
    upd_s = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else None
    return {"parameters": n_params, "dtype": str(dtype).replace("torch.", ""), "G": G, "B": B, "new_tokens": new,
            "generated_tokens": tokens, "generate_s": round(gen_s, 2), "tokens_per_s": round(tokens / gen_s, 1),
            "grpo_update_s": round(upd_s, 2), "peak_gpu_memory_gib": None if peak is None else round(peak, 2)}


FSDP_CHILD = """
import json, os, sys, time, torch
sys.path.insert(0, {root!r})
from transformers import AutoModelForCausalLM, Qwen2Config
from reasoning_rl.trainers.sharding import ShardPlan, full_state_dict, full_weights, shard
torch.distributed.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
rank = torch.distributed.get_rank()
device = "cuda" if torch.cuda.is_available() else "cpu"
if device == "cuda":
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
model = AutoModelForCausalLM.from_config(Qwen2Config(**{dims!r}, tie_word_embeddings=True)).to(device)
shard(model, ShardPlan(mixed_precision="bf16" if device == "cuda" else "no", activation_checkpointing=True), device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
ids = torch.randint(0, {vocab}, (4, 128), device=device)
t = time.perf_counter()
loss = model(input_ids=ids, labels=ids).loss
loss.backward()
opt.step()
if device == "cuda":
    torch.cuda.synchronize()
step_s = time.perf_counter() - t
with full_weights(model):
    model(input_ids=ids[:1, :8])  # a rank-local forward on whole weights
state = full_state_dict(model)
if rank == 0:
    print("FSDP2 " + json.dumps({{"ranks": torch.distributed.get_world_size(), "loss": float(loss), "step_s": step_s,
          "tensors": len(state), "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else 0}}))
torch.distributed.destroy_process_group()
"""


def fsdp2_step(tiny: bool) -> dict:
    """One FSDP2 training step (every GPU a rank, bf16 compute, activation checkpointing) of the 0.5 B shape, a forward
    on whole weights and the full state gathered, through the trainer's own sharding (torchrun children)."""
    import shutil
    import subprocess

    import torch

    dims = TINY if tiny else BIG
    code = FSDP_CHILD.format(root=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), dims=dims,
                             vocab=dims["vocab_size"])
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or "torchrun"
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
    try:
        out = subprocess.run([torchrun, "--nproc-per-node", str(max(1, torch.cuda.device_count())), f.name],
                             capture_output=True, text=True, timeout=600)
    finally:
        os.unlink(f.name)
    line = next((x for x in out.stdout.splitlines() if x.startswith("FSDP2 ")), None)
    return json.loads(line[6:]) if line else {"failed": out.stderr.strip().splitlines()[-3:]}


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="the same steps at a tiny size (no GPU needed)")
    ap.add_argument("--out", default=os.environ.get("OUT", ""), help="folder for gpu_check.json")
    a = ap.parse_args()
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    tiny = a.tiny or device == "cpu"
    report = {"device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu", "torch": torch.__version__,
              "tiny": tiny}
    with tempfile.TemporaryDirectory() as tmp:
        report["learning"] = learning(device, tiny, tmp)
    report["throughput"] = throughput(device, tiny)
    report["fsdp2"] = fsdp2_step(tiny)
    print(json.dumps(report, indent=1))
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "gpu_check.json"), "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
