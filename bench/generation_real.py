"""Generation speed on the real model (SmolLM2-135M-Instruct): the `hf` engine against `transformers.generate`,
and both against the bounds this machine sets, measured in the same run.

    .venv/bin/python bench/generation_real.py [--prompts 8] [--n 4] [--tokens 64] [--threads 0] [--repeats 2]
                                              [--dtype float32|bfloat16] [--no-vllm] [--ablate]

Every engine gets the same prompts (word problems through the chat template), the same batch (prompts x n
samples), temperature 1, the same max tokens and end tokens. Tokens are counted up to and including each
sample's end-of-turn token; `generate` keeps computing finished rows until the last one ends, the `hf`
engine drops them (rollout/decode.py) and runs each prompt once for its n samples (and the chat template's
system prompt, which every prompt begins with, once for all of them).

Four rows: the `hf` engine as a run uses it (`generation.cpu_decode=auto`: the combination of prepacked oneDNN
products, one uniform draw per token and the decode attention measured fastest here, rollout/kernel_choice.py),
`transformers.generate`, and to
tell the two gains apart, the `hf` engine on eager kernels (PyTorch's layers, torch.multinomial) and `generate`
with the same prepacked products.

The bounds for the job the `hf` engine ran (these prompts, its samples' lengths), from this run's own
measurements:
- memory: every forward pass reads every weight once, and the job needs as many passes as its longest sample has
  tokens (the prompts' pass, then one per token but the last); time >= passes x weight bytes / copy bandwidth (a
  large tensor copy, bytes read + written per second);
- compute: a generated token costs 2 x parameters FLOPs, a prompt token 2 x (parameters - embedding) (its logits
  are not computed) and each prompt's last position the output layer once (attention left out); time >= FLOPs /
  matmul FLOP/s, with FLOP/s of a (rows x hidden) @ (hidden x 4 hidden) matmul, the faster of eager PyTorch's
  and a oneDNN-prepacked weight's, at rows = the batch for generated tokens and rows = the prompts' tokens for
  theirs. The prompts are counted once each, and the tokens they all begin with (the chat template's system
  prompt) once for all (the least any engine can run; the `hf` engine runs them so, decode.py's `share`).
Tokens/s bound = the job's generated tokens / the larger time. Printed beside it, the bound earlier stops printed:
generated tokens only, every row live at every step (batch x bandwidth / weight bytes; FLOP/s / (2 x parameters)).
The smaller of the two binds; each engine's share of it is printed. One run is noisy: read the ratios.
vLLM's CPU build (when .venv-vllm exists, `make vllm-env`: its pins clash with ours) runs the same prompts,
batch and sampling in a child process of that environment, on the converted folder of the same model (the same
dtype, eager mode, one warm-up call first); its start-up is reported apart and not counted. Every engine runs
`--repeats` times, the best rate counts; vLLM's runs come after ours (it owns the cores while it is up).
`--ablate` instead runs only the `hf` engine, on each of the 32 combinations of its CPU kernels forced
(rollout/cpu_kernels.py: packed products, the uniform draw, the decode attention; rollout/kv_buffer.py: the KV
cache written in place; rollout/fused_step.py: the fused decode step; eager is none of them; `--only` names a
subset, as the log names them: draw+buffer+step), rounds
alternating, and prints each one's best tokens/s against eager's of the same run, the tokens it drew, and where
`auto`'s measured choice (rollout/kernel_choice.py, made before the clock) lands among them.
Not here: prompts of other lengths."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
VPY = os.path.join(ROOT, ".venv-vllm", "bin", "python")


def child_vllm(a) -> None:
    """Inside .venv-vllm: the vLLM runs of the parent's prompts, as one JSON line (best tokens/s, start-up)."""
    from reasoning_rl.rollout import SamplingConfig
    from reasoning_rl.rollout.vllm import VLLMEngine

    with open(a.child_vllm, encoding="utf-8") as f:
        job = json.load(f)
    t0 = time.perf_counter()
    eng = VLLMEngine(job["model"], dtype=job["dtype"], max_model_len=1024)
    startup = time.perf_counter() - t0
    eng.generate(job["prompts"][:2], 2, SamplingConfig(max_tokens=4))  # warm-up
    best = 0.0
    for _ in range(job["repeats"]):
        t = time.perf_counter()
        groups = eng.generate(job["prompts"], job["n"], SamplingConfig(temperature=1.0, max_tokens=job["tokens"], seed=0))
        n = sum(min(len(x.token_ids), job["tokens"]) for g in groups for x in g.samples)
        best = max(best, n / (time.perf_counter() - t))
    print(json.dumps({"rate": best, "startup": startup}))


def vllm_rate(model_dir: str, prompts: list, a) -> tuple[float | None, str]:
    """(best tokens/s, a note) of vLLM's CPU build on the same job, or (None, why not)."""
    if not os.path.exists(VPY):
        return None, "no .venv-vllm (run `make vllm-env`)"
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"model": model_dir, "prompts": prompts, "n": a.n, "tokens": a.tokens, "repeats": a.repeats,
                   "dtype": a.dtype}, f)
    threads = str(a.threads or len(os.sched_getaffinity(0)))
    proc = subprocess.run([VPY, os.path.abspath(__file__), "--child-vllm", f.name], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": threads,
                                          "VLLM_CPU_OMP_THREADS_BIND": "all"})
    os.unlink(f.name)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return None, f"failed ({proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode})"
    r = json.loads(lines[-1])
    return r["rate"], f"start-up {r['startup']:.0f} s, not counted"


def copy_bandwidth(torch, mb: int = 256, rounds: int = 5) -> float:
    """Bytes per second moved by a large float32 copy (each byte read once and written once)."""
    src = torch.randn(mb * 2**20 // 4)
    dst = torch.empty_like(src)
    dst.copy_(src)
    t = time.perf_counter()
    for _ in range(rounds):
        dst.copy_(src)
    return 2 * src.numel() * 4 * rounds / (time.perf_counter() - t)


def matmul_flops(torch, batch: int, hidden: int, dtype, rounds: int = 50) -> tuple[float, str]:
    """The faster of two ways this machine multiplies (batch x hidden) by (hidden x 4 hidden) in `dtype`: eager
    PyTorch and a weight prepacked for oneDNN (what cpu_decode=packed runs); (FLOP/s, which)."""
    x, w = torch.randn(batch, hidden, dtype=dtype), torch.randn(4 * hidden, hidden, dtype=dtype)
    packed = w.to_mkldnn()
    ways = {"eager": lambda: torch.nn.functional.linear(x, w),
            "oneDNN packed": lambda: torch._C._nn.mkldnn_linear(x.to_mkldnn(), packed, None).to_dense()}
    rates = {}
    for name, fn in ways.items():
        fn()
        t = time.perf_counter()
        for _ in range(rounds):
            fn()
        rates[name] = 2 * batch * hidden * 4 * hidden * rounds / (time.perf_counter() - t)
    best = max(rates, key=rates.get)
    return rates[best], best


def ablate(model, tok, prompts: list, a) -> None:
    """The hf engine on each combination of its CPU kernels (or those `--only` names), forced, and on what `auto`
    chose (measured first, rollout/kernel_choice.py); each row's best rate against eager's, and whether auto's
    choice is the fastest of the whole rollouts here (within the chooser's margin)."""
    from reasoning_rl.rollout import HFEngine, SamplingConfig, cpu_kernels, kernel_choice

    name = kernel_choice.name_of
    note = cpu_kernels.auto_choice("auto", model, a.prompts * a.n)
    print(note or "auto: not measured for this model (under the size floor, or not on a CPU): eager")
    auto = cpu_kernels.resolve("auto", model, a.prompts * a.n)
    steps = tuple((name(k), k) for k in kernel_choice.CANDIDATES if not a.only or name(k) in a.only)
    if auto not in [k for _, k in steps]:
        steps += ((name(auto), auto),)  # auto's choice is always among the forced ones
    if kernel_choice.EAGER not in [k for _, k in steps]:
        steps = ((name(kernel_choice.EAGER), kernel_choice.EAGER), *steps)  # the baseline of every ratio
    best, drawn = {}, {}
    resolve = cpu_kernels.resolve
    try:
        for _ in range(a.repeats):
            for label, kernels in steps:
                cpu_kernels.resolve = lambda setting, m, rows=16, k=kernels: k  # what decoding() runs on here
                t = time.perf_counter()
                groups = HFEngine(model, tok).generate(prompts, a.n, SamplingConfig(
                    temperature=1.0, max_tokens=a.tokens, seed=0))
                n = sum(len(s.token_ids) for g in groups for s in g.samples)
                best[label], drawn[label] = max(best.get(label, 0.0), n / (time.perf_counter() - t)), n
    finally:
        cpu_kernels.resolve = resolve
    base = best["eager"]
    print(f"hf engine, {model.dtype}, {a.prompts} prompts x {a.n} samples, <= {a.tokens} tokens, best of "
          f"{a.repeats} rounds, {'these combinations' if a.only else 'every combination'} forced")
    for label, rate in sorted(best.items(), key=lambda kv: -kv[1]):
        print(f"{label:<24} {rate:8.1f} tokens/s  {rate / base:5.2f}x eager  ({drawn[label]} tokens drawn)"
              + ("   <- auto's choice" if label == name(auto) else ""))
    fastest = max(best, key=best.get)
    print(f"auto chose {name(auto)} at {best[name(auto)] / best[fastest]:.1%} of the fastest forced combination "
          f"({fastest}); eager would be {base / best[fastest]:.1%}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=0, help="0 = every core")
    ap.add_argument("--repeats", type=int, default=2, help="timed runs per engine, alternating; the best counts")
    ap.add_argument("--no-vllm", action="store_true", help="leave vLLM's CPU build out")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="model.dtype for every engine")
    ap.add_argument("--ablate", action="store_true", help="the hf engine on each combination of its CPU kernels")
    ap.add_argument("--only", default="", type=lambda s: [x for x in s.split(",") if x],
                    help="with --ablate: only these combinations, comma-separated as the log names them "
                         "(eager,buffer,draw+buffer,...); eager and auto's choice are always run")
    ap.add_argument("--child-vllm", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    if a.child_vllm:
        return child_vllm(a)
    import torch

    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.device import resolve_threads
    from reasoning_rl.models.load import load_policy
    from reasoning_rl.rollout import HFEngine, SamplingConfig, decode
    from reasoning_rl.rollout.base import stop_ids
    from reasoning_rl.rollout import cpu_kernels
    from reasoning_rl.task.embedded.arithmetic import make_rows

    cfg = config.load(Config, None, ["model.name_or_path=smollm2-135m-instruct", f"num_threads={a.threads}",
                                     f"model.dtype={a.dtype}",
                                     "tasks.families=[word_add, word_sub, word_mul, word_two]", "tasks.max_digits=1"])
    torch.set_num_threads(resolve_threads(cfg.num_threads, cfg.model.name_or_path))
    model, tok = load_policy(cfg, log=lambda *_: None)
    rows = make_rows(cfg.tasks)[0][:a.prompts]
    prompts = [tok.apply_chat_template([{"role": "user", "content": r["prompt"] + "\nPut the final answer in "
                                         "\\boxed{}."}], tokenize=False, add_generation_prompt=True) for r in rows]
    ends = stop_ids(model, tok)
    batch = a.prompts * a.n
    params = sum(p.numel() for p in model.parameters())
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())

    job = {}  # the hf engine's last run: generated tokens, the longest sample

    def hf(kernels: str) -> int:
        groups = HFEngine(model, tok).generate(prompts, a.n, SamplingConfig(temperature=1.0, max_tokens=a.tokens,
                                                                            seed=0, cpu_decode=kernels))
        lengths = [len(s.token_ids) for g in groups for s in g.samples]
        if kernels == "auto":
            job.update(generated=sum(lengths), longest=max(lengths))
        return sum(lengths)

    def generate(packed: bool = False) -> int:
        tok.padding_side = "left"
        enc = tok([p for p in prompts for _ in range(a.n)], return_tensors="pt", padding=True)
        torch.manual_seed(0)
        with torch.no_grad(), (cpu_kernels.packed_linears(model) if packed else contextlib.nullcontext()):
            out = model.generate(**enc, do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
                                 max_new_tokens=a.tokens, eos_token_id=ends, pad_token_id=tok.pad_token_id)
        n = 0
        for row in out[:, enc["input_ids"].shape[1]:].tolist():
            cut = next((i + 1 for i, t in enumerate(row) if t in ends), len(row))
            n += cut
        return n

    if a.ablate:
        return ablate(model, tok, prompts, a)
    print(cpu_kernels.auto_choice("auto", model, batch) or "auto: eager (not measured)")  # before any clock starts
    best: dict[str, float] = {}
    engines = (("hf engine", lambda: hf("auto")), ("transformers.generate", generate),
               ("hf engine, eager kernels", lambda: hf("eager")),
               ("generate, packed products", lambda: generate(packed=True)))
    for _ in range(a.repeats):
        for name, fn in engines:
            t = time.perf_counter()
            n = fn()
            best[name] = max(best.get(name, 0.0), n / (time.perf_counter() - t))
    notes = {}
    if not a.no_vllm:
        from reasoning_rl.models.sources import resolve

        folder = resolve(cfg.model.name_or_path, dtype=a.dtype, log=lambda *_: None)
        rate, notes["vllm (CPU build)"] = vllm_rate(folder, prompts, a)
        if rate is not None:
            best["vllm (CPU build)"] = rate
        else:
            print(f"vllm (CPU build): {notes['vllm (CPU build)']}")
    bw = copy_bandwidth(torch)
    flops, way = matmul_flops(torch, batch, model.config.hidden_size, model.dtype)
    enc = tok(prompts, padding=True, return_tensors="pt")  # left-padded, as the engine pads them
    shared = decode.run_once(enc["input_ids"], enc["attention_mask"])  # the tokens every prompt begins with
    prompt_tokens = int(enc["attention_mask"].sum()) - shared * (a.prompts - 1)
    prefill_flops, _ = matmul_flops(torch, prompt_tokens, model.config.hidden_size, model.dtype, rounds=10)
    embedding = model.get_input_embeddings().weight.numel()
    decode_work = 2 * job["generated"] * params
    prompt_work = 2 * (prompt_tokens * (params - embedding) + a.prompts * embedding)
    job_flops = decode_work + prompt_work
    mem_s, compute_s = job["longest"] * weight_bytes / bw, decode_work / flops + prompt_work / prefill_flops
    mem_bound, compute_bound = job["generated"] / mem_s, job["generated"] / compute_s
    bound = min(mem_bound, compute_bound)
    earlier = min(batch * bw / weight_bytes, flops / (2 * params))
    print(f"model: {params / 1e6:.1f} M parameters, {weight_bytes / 2**20:.0f} MiB of weights ({model.dtype}); "
          f"{torch.get_num_threads()} threads; batch {a.prompts} prompts x {a.n} samples, <= {a.tokens} tokens; "
          f"the hf engine's default kernels here (generation.cpu_decode=auto, measured): "
          f"{cpu_kernels.resolve('auto', model, batch)}")
    print(f"job: {a.prompts} prompts of {prompt_tokens} tokens in all (the {shared} they begin with counted once), "
          f"{job['generated']} tokens generated, the "
          f"longest {job['longest']}: {job['longest']} forward passes, {job_flops / 1e9:.0f} GFLOP")
    print(f"bounds: memory {bw / 1e9:.1f} GB/s copy -> {mem_s:.2f} s, {mem_bound:.0f} tokens/s; compute "
          f"{flops / 1e9:.0f} GFLOP/s matmul at {batch} rows ({way}), {prefill_flops / 1e9:.0f} at {prompt_tokens} "
          f"-> {compute_s:.2f} s, {compute_bound:.0f} tokens/s; the bound is "
          f"{bound:.0f} tokens/s (as earlier stops counted it, generated tokens only and every row live: "
          f"{earlier:.0f})")
    for name, rate in best.items():
        print(f"{name:<24} {rate:8.1f} tokens/s  {rate / bound:6.1%} of the bound ({rate / earlier:.1%} of the "
              f"earlier)" +
              (f"  ({notes[name]})" if name in notes else ""))
    print(f"ratio hf engine / transformers.generate: {best['hf engine'] / best['transformers.generate']:.2f}x")
    if "vllm (CPU build)" in best:
        print(f"ratio hf engine / vllm (CPU build): {best['hf engine'] / best['vllm (CPU build)']:.2f}x")


if __name__ == "__main__":
    main()
