"""The `openai` engine against a real HTTP server on loopback that serves the tiny model
(through the hf engine) with the OpenAI completions schema, vLLM-style token ids."""
import pytest

from reasoning_rl import config
from reasoning_rl.config.sections import Config
from reasoning_rl.models.load import build_tiny
from reasoning_rl.rollout import HFEngine, SamplingConfig, logprob_mismatch
from reasoning_rl.rollout.openai import OpenAIEngine, RolloutError
from tests.helpers.openai_server import Server


@pytest.fixture(scope="module")
def tiny():
    model, tok = build_tiny(config.load(Config, overrides=["model.tiny.num_layers=2"]))
    return model.eval(), tok


@pytest.mark.timeout(120)
def test_groups_from_a_real_server_match_the_local_model(tiny):
    model, tok = tiny
    with Server(HFEngine(model, tok)) as srv:
        eng = OpenAIEngine(srv.url, "tiny", max_concurrency=4)
        groups = eng.generate(["1+2=", "30+4=", "9*9="], 3, SamplingConfig(temperature=1.0, max_tokens=5, seed=0))
    assert [len(g.samples) for g in groups] == [3, 3, 3] and groups[1].prompt == "30+4="
    for s in (x for g in groups for x in g.samples):
        assert len(s.token_ids) == len(s.logprobs) and s.finish_reason in ("stop", "length")
    assert logprob_mismatch(model, tok, groups)["rollout/logprob_mismatch_max"] < 1e-4


@pytest.mark.timeout(120)
def test_retries_after_a_500(tiny):
    model, tok = tiny
    with Server(HFEngine(model, tok), fail_first=2) as srv:
        eng = OpenAIEngine(srv.url, "tiny", max_concurrency=1, retries=3, backoff=0.01)
        groups = eng.generate(["1+2="], 2, SamplingConfig(max_tokens=3))
    assert len(groups[0].samples) == 2 and eng.retried == 2 and srv.calls == 3


@pytest.mark.timeout(60)
def test_unreachable_server_is_a_clear_error():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens here now
    eng = OpenAIEngine(f"http://127.0.0.1:{port}/v1", "tiny", retries=1, backoff=0.01, timeout=2)
    with pytest.raises(RolloutError, match=r"no answer from http://127.0.0.1:\d+/v1/completions after 2 tries"):
        eng.generate(["1+1="], 1, SamplingConfig())
    with pytest.raises(NotImplementedError, match="no weights_dir"):
        eng.update_weights(None)
    with pytest.raises(ValueError, match="http"):
        OpenAIEngine("localhost:8000", "tiny")
