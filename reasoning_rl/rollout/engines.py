"""The rollout engine a run's RL section names: hf | worker | vllm | openai, with episodes when it names an environment.

    make_engine(cfg, rl, model, tok) -> engine   `generate(prompts, n, sampling) -> groups`, `update_weights(model)`

hf samples from the very object being trained; worker, vllm and openai start from the trainer's weights (pushed
here once, so a resumed run's engine holds the checkpoint's). vLLM, the worker process and the HTTP client are
imported only when asked for. Not here: the engines themselves (hf.py, worker.py, vllm.py, openai.py, episodes.py).
"""
from __future__ import annotations

import os

from ..config.sections import Config
from ..config.rl import DistillConfig, PPOConfig, RLConfig
from ..models.device import resolve_threads
from .hf import HFEngine


def engine_urls(value: str) -> list[str]:
    """`engine_url`'s servers: one URL, or several separated by commas or spaces (a fleet)."""
    return [u for u in value.replace(",", " ").split() if u]


def check_sampling(cfg: Config, rl: RLConfig, section: str) -> None:
    """Top-p below 1 trains on the kept set's log-probs (docs/algorithms.md §kept-set): refused, in one line, where
    the samples cannot carry that set (each token's floor) to the trainer: the vllm and openai engines (their
    servers return the processed log-prob, not the set it was taken over), multi-turn episodes, and distillation
    (the teacher's signal is over the whole vocabulary)."""
    if cfg.generation.top_p >= 1.0 or cfg.generation.temperature == 0:
        return
    why = ("the vllm and openai engines return no kept set to renormalise the trainer's log-probs over"
           if rl.engine in ("vllm", "openai") else
           "multi-turn episodes do not carry the kept set yet" if rl.environment else
           "distillation compares whole distributions" if section == "distill" else "")
    if why:
        from ..errors import UserError

        raise UserError(f"generation.top_p={cfg.generation.top_p:g} with {section} (engine {rl.engine}"
                        f"{', environment ' + rl.environment if rl.environment else ''}): {why}; the importance ratio "
                        "would be biased by the kept mass. Use generation.top_p=1, or the hf or worker engine")


def make_engine(cfg: Config, rl: RLConfig, model, tok):
    """hf samples from the very object being trained; worker, vllm and openai start from the trainer's weights."""
    check_sampling(cfg, rl, "distill" if isinstance(rl, DistillConfig) else "ppo" if isinstance(rl, PPOConfig) else
                   "grpo")
    if rl.engine == "vllm":
        from .vllm import VLLMEngine  # vLLM is an optional extra: imported only when asked for

        init = os.path.join(cfg.output_dir, "engine-init")
        model.save_pretrained(init)
        tok.save_pretrained(init)
        tiny = cfg.model.name_or_path == "tiny"
        engine = VLLMEngine(init, dtype="float32", seed=cfg.seed,
                            max_model_len=cfg.model.tiny.max_position_embeddings if tiny else None)
    elif rl.engine == "openai":
        from .fleet import FleetEngine
        from .openai import OpenAIEngine

        urls = engine_urls(rl.engine_url)
        servers = [OpenAIEngine(u, rl.engine_model, tokenizer=tok, timeout=rl.request_timeout_s,
                                weights_dir=rl.weights_dir or os.path.join(cfg.output_dir, "weights"),
                                push_timeout=rl.push_timeout_s) for u in urls]
        engine = servers[0] if len(servers) == 1 else FleetEngine(servers)
    elif rl.engine == "worker":
        from .worker import WorkerEngine

        threads = rl.generation_threads or resolve_threads(cfg.num_threads, cfg.model.name_or_path)
        engine = WorkerEngine(model, tok, os.path.join(cfg.output_dir, "engine-worker"), num_threads=threads,
                              device=str(model.device), trust_remote_code=cfg.model.trust_remote_code)
    elif rl.environment:  # multi-turn episodes on the hf engine (grpo.environment)
        from .episodes import EpisodeEngine

        return EpisodeEngine.of(rl, model, tok)
    else:
        return HFEngine(model, tok)
    if rl.environment:  # multi-turn episodes whose segments vllm or openai samples from token ids
        from .episodes import EpisodeEngine

        engine = EpisodeEngine.of(rl, model, tok, engine)
    engine.update_weights(model)  # a resumed run's weights, not the saved initial ones
    return engine
