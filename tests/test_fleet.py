"""A fleet of inference servers (rollout/fleet.py) against real HTTP servers on loopback serving the tiny model: groups
spread over them, never split; every push and request within its deadline, a server that stops answering named in
one line; LoRA runs push only their adapters; `grpo.engine_url` takes several URLs."""
from __future__ import annotations

import time

import pytest

from reasoning_rl import config
from reasoning_rl.config.knobs import ConfigError
from reasoning_rl.config.sections import Config
from reasoning_rl.models.load import build_tiny
from reasoning_rl.rollout import HFEngine, SamplingConfig
from reasoning_rl.rollout.engines import engine_urls
from reasoning_rl.rollout.fleet import FleetEngine
from reasoning_rl.rollout.openai import OpenAIEngine, RolloutError, push_deadline
from tests.helpers.openai_server import Server

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def tiny():
    model, tok = build_tiny(config.load(Config, overrides=["model.tiny.num_layers=1"]))
    return model.eval(), tok


def test_groups_are_spread_over_two_servers_and_never_split(tiny, tmp_path):
    model, tok = tiny
    prompts = ["1+2=", "3+4=", "5+6=", "7+8=", "9+1="]
    with Server(HFEngine(model, tok)) as a, Server(HFEngine(model, tok)) as b:
        fleet = FleetEngine([OpenAIEngine(s.url, "tiny", max_concurrency=2, weights_dir=str(tmp_path))
                             for s in (a, b)])
        groups = fleet.generate(prompts, 3, SamplingConfig(temperature=1.0, max_tokens=4, seed=0))
        fleet.update_weights(model)  # pushed to both, written once
    assert [g.prompt for g in groups] == prompts and all(len(g.samples) == 3 for g in groups)
    assert a.calls == 3 and b.calls == 2  # prompts dealt in turn
    assert all(body["n"] == 3 for srv in (a, b) for body in srv.bodies)  # one request per group: never split
    m = fleet.metrics()
    assert m["fleet/0/share"] == pytest.approx(0.6) and m["fleet/1/share"] == pytest.approx(0.4)
    assert m["fleet/0/latency_s"] > 0 and m["fleet/1/latency_s"] > 0
    assert a.reloads == 1 and b.reloads == 1 and sorted(p.name for p in tmp_path.iterdir()) == ["v1"]


def test_a_push_to_a_server_that_stops_answering_ends_within_its_deadline_naming_it(tiny, tmp_path):
    model, tok = tiny
    with Server(HFEngine(model, tok)) as ok, Server(HFEngine(model, tok), hang_s=6.0) as stuck:
        fleet = FleetEngine([OpenAIEngine(s.url, "tiny", weights_dir=str(tmp_path), push_timeout=1.0)
                             for s in (ok, stuck)])
        t0 = time.monotonic()
        with pytest.raises(RolloutError) as e:
            fleet.update_weights(model)
        assert time.monotonic() - t0 < 5  # the deadline (1 s), not the server's hang (6 s)
    port = stuck.url.split(":")[2].split("/")[0]
    assert f"127.0.0.1:{port}" in str(e.value) and "while pushing weights v1" in str(e.value)
    assert ok.reloads == 1  # the other server took the push


def test_a_server_that_dies_mid_run_is_reported_not_waited_on(tiny):
    model, tok = tiny
    srv = Server(HFEngine(model, tok)).__enter__()
    eng = OpenAIEngine(srv.url, "tiny", retries=1, backoff=0.01, timeout=2)
    assert eng.generate(["1+1="], 2, SamplingConfig(max_tokens=3))  # answers
    srv.stop()  # gone in the middle of the run
    t0 = time.monotonic()
    with pytest.raises(RolloutError, match=r"no answer from .*/completions after 2 tries of 2 s while sampling"):
        eng.generate(["1+1="], 2, SamplingConfig(max_tokens=3))
    assert time.monotonic() - t0 < 10


def test_a_lora_run_pushes_only_its_adapters_and_then_samples_from_them(tiny, tmp_path):
    from peft import LoraConfig, get_peft_model

    model, tok = tiny
    import copy

    peft_model = get_peft_model(copy.deepcopy(model), LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    with Server(HFEngine(model, tok)) as srv:
        eng = OpenAIEngine(srv.url, "tiny", weights_dir=str(tmp_path))
        eng.update_weights(peft_model)
        eng.update_weights(peft_model)
        eng.generate(["1+1="], 1, SamplingConfig(max_tokens=2))
    loads = [x for x in srv.adapters if x[0] == "load_lora_adapter"]
    assert [x[1] for x in loads] == ["tiny-lora-v1", "tiny-lora-v2"]
    assert all("adapter_model.safetensors" in x[2] and "model.safetensors" not in x[2] for x in loads)
    assert ("unload_lora_adapter", "tiny-lora-v1", []) in srv.adapters  # the stale adapters let go
    assert srv.bodies[-1]["model"] == "tiny-lora-v2"  # requests name the adapters pushed last
    assert srv.reloads == 0  # the base model's weights never re-sent
    assert push_deadline(peft_model) < push_deadline(model) + 1  # sized to what is pushed


# (engine_url, the servers, or the error's fragment)
URLS = [
    ("http://a:8000/v1", ["http://a:8000/v1"]),
    ("http://a:8000/v1,http://b:8000/v1", ["http://a:8000/v1", "http://b:8000/v1"]),
    ("http://a:8000/v1, http://b:8000/v1 http://c:8000/v1", ["http://a:8000/v1", "http://b:8000/v1",
                                                             "http://c:8000/v1"]),
    ("http://a:8000/v1,b:8000", "'b:8000' is not an http:// or https:// URL"),
    ("http://a:8000/v1,http://a:8000/v1", "a server is named twice"),
]


@pytest.mark.parametrize("value,expected", URLS)
def test_engine_url_takes_several_servers(value, expected):
    overrides = ["grpo.engine=openai", f"grpo.engine_url={value}", "grpo.engine_model=policy"]
    if isinstance(expected, str):
        with pytest.raises(ConfigError, match=expected):
            config.load(Config, overrides=overrides)
    else:
        cfg = config.load(Config, overrides=overrides)
        assert engine_urls(cfg.grpo.engine_url) == expected
