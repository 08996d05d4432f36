"""The `judge` verifier against a real OpenAI-compatible HTTP server on loopback, started here."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import verifiers
from reasoning_rl.types import Status
from verifiers.judge import JudgeConfig, JudgeVerifier, parse_judgement

pytestmark = pytest.mark.timeout(120)


class FakeJudge(BaseHTTPRequestHandler):
    """Judges 'Answer to grade: X' against 'Reference answer: Y'; scripted failures by model name."""

    calls: list = []
    fail_first: dict = {}

    def log_message(self, *a):  # quiet
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeJudge.calls.append((time.monotonic(), body["model"], self.headers.get("Authorization")))
        model = body["model"]
        if FakeJudge.fail_first.get(model, 0) > 0:
            FakeJudge.fail_first[model] -= 1
            self.send_response(500)
            self.end_headers()
            return
        text = body["messages"][0]["content"]
        if model == "garbage":
            reply = "I would rather not say."
        elif model == "always-500":
            self.send_response(500)
            self.end_headers()
            return
        else:
            ref = text.split("Reference answer: ")[1].split("\n")[0]
            got = text.split("Answer to grade: ")[1].split("\n")[0]
            reply = "CORRECT" if ref in got else "INCORRECT"
        out = json.dumps({"choices": [{"message": {"content": reply}}],
                          "usage": {"prompt_tokens": len(text.split()), "completion_tokens": 1}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


@pytest.fixture(scope="module")
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), FakeJudge)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()


def judge(server, **kw) -> JudgeVerifier:
    return JudgeVerifier(JudgeConfig(base_url=server, **{"model": "fake", "backoff_s": 0.05, **kw}))


def test_correct_and_incorrect_are_parsed(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    j = judge(server)
    ok = j.verify("so the answer is 12", reference="12", prompt="3*4?")
    bad = j.verify("so the answer is 13", reference="12", prompt="3*4?")
    assert ok.status is Status.CORRECT and ok.score == 1.0
    assert bad.status is Status.INCORRECT and bad.score == 0.0
    assert ok.metrics["completion_tokens"] == 1 and ok.metrics["prompt_tokens"] > 5 and ok.metrics["latency_s"] > 0
    assert FakeJudge.calls[-1][2] == "Bearer sk-test"  # the key comes from the environment variable


def test_unparseable_judge_output_is_masked(server):
    v = judge(server, model="garbage").verify("12", reference="12")
    assert v.status is Status.ABSTAIN and v.score is None and "UNPARSEABLE" in v.detail


def test_retries_after_a_500_then_succeeds(server):
    FakeJudge.fail_first["flaky"] = 2
    before = len(FakeJudge.calls)
    v = judge(server, model="flaky", retries=3).verify("12", reference="12")
    assert v.status is Status.CORRECT and len(FakeJudge.calls) - before == 3


def test_a_failing_or_unreachable_endpoint_is_error_never_a_score(server):
    v = judge(server, model="always-500", retries=1).verify("12", reference="12")
    assert v.status is Status.ERROR and v.score is None and "failed 2 times" in v.detail
    dead = JudgeVerifier(JudgeConfig(base_url="http://127.0.0.1:9/v1", model="x", retries=1, backoff_s=0.01,
                                     timeout_s=2)).verify("12", reference="12")
    assert dead.status is Status.ERROR and dead.score is None


def test_rate_limit_is_measured_at_the_server(server):
    j = judge(server, model="paced", rate_per_s=10.0, burst=1, concurrency=4)
    t0 = time.monotonic()
    out = j.verify_batch([f"answer {i}" for i in range(8)], ["answer"] * 8)
    elapsed = time.monotonic() - t0
    stamps = sorted(t for t, model, _ in FakeJudge.calls if model == "paced")
    assert all(v.status is Status.CORRECT for v in out) and len(stamps) == 8
    assert elapsed >= 0.65  # 8 requests at 10/s with a burst of 1: at least 7 gaps of 0.1 s
    rate = (len(stamps) - 1) / (stamps[-1] - stamps[0])
    assert rate <= 11.0, rate


def test_second_pass_is_served_from_the_cache_with_no_request(server):
    from verifiers.registry import REGISTRY

    j = JudgeVerifier(JudgeConfig(base_url=server, model="cached"), name="loopback_judge")
    verifiers.register(j)  # a user verifier: pickled to the runtime's workers
    pool = verifiers.VerifierPool(num_workers=2)
    try:
        refs, outs = ["12", "7", "5"], ["12", "8", "5"]
        first = pool.verify_batch("loopback_judge", outs, refs, prompt="q")
        sent = sum(1 for _, m, _ in FakeJudge.calls if m == "cached")
        second = pool.verify_batch("loopback_judge", outs, refs, prompt="q")
        assert [v.status for v in first] == [Status.CORRECT, Status.INCORRECT, Status.CORRECT], first
        assert [v.score for v in second] == [v.score for v in first]
        assert sum(1 for _, m, _ in FakeJudge.calls if m == "cached") == sent == 3  # no request the second time
        assert pool.stats.hits["loopback_judge"] == 3
    finally:
        pool.close()
        REGISTRY.remove("loopback_judge")


@pytest.mark.parametrize("text,mode,expected", [
    ("CORRECT", "verdict", 1.0),
    ("The answer is INCORRECT.", "verdict", 0.0),
    ("Looks CORRECT... no wait, INCORRECT", "verdict", 0.0),  # the last verdict word wins
    ("Score: 7", "number", 6 / 9),
    ("Score: 11", "number", None),                          # off the 1-10 scale
    ('{"score": 10}', "json", 1.0),
    ("{oops", "json", None),
    ("no verdict here", "verdict", None),
])
def test_parsers(text, mode, expected):
    got = parse_judgement(text, mode, {"CORRECT": 1.0, "INCORRECT": 0.0}, (1.0, 10.0))
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_local_transformers_backend_runs_and_masks_what_it_cannot_parse(tmp_path):
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.load import build_tiny

    model, tok = build_tiny(config.load(Config, overrides=["model.tiny.num_layers=1"]))
    model.generation_config.suppress_tokens = [tok.eos_token_id]
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    v = JudgeVerifier(JudgeConfig(backend="hf", model=str(tmp_path), max_tokens=4)).verify("12", reference="12")
    assert v.status is Status.ABSTAIN and "UNPARSEABLE" in v.detail  # a random tiny model says no verdict word
    assert v.metrics["completion_tokens"] == 4
