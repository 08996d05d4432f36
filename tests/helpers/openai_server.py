"""A real HTTP server on loopback that serves a local model with the OpenAI completions schema, as vLLM does:
token ids back as "token_id:<id>" strings with their log-probs. A text prompt is sampled by the hf engine's
`generate`; a prompt given as token ids (with `stop_token_ids`, as the episodes send) by its `continue_ids`,
seeded by the request's `seed`. `fail_first` answers that many requests with a 500 first. vLLM's dev endpoints
for weight pushes are served too: POST /collective_rpc {"method": "reload_weights", "kwargs": {"weights_path"}}
loads the pushed safetensors into the served model (`reloads` counts them), /reset_prefix_cache does nothing.
POST /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM's run-time LoRA loading) are recorded in `adapters`
(the name, and the files of the folder pushed). `hang_s` makes a weight push hang that long before answering (a
server that stops answering); `stop()` closes the server in the middle of a run."""
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from reasoning_rl.rollout import SamplingConfig
from reasoning_rl.types import Sample


def _continue(engine, body) -> Sample:
    import torch

    if body.get("seed") is not None:
        torch.manual_seed(body["seed"])
    stops = list(body.get("stop_token_ids") or [engine.tokenizer.eos_token_id])
    (ids, lps), = engine.continue_ids([body["prompt"]], body["max_tokens"], stops, SamplingConfig(
        temperature=body["temperature"], top_p=body.get("top_p", 1.0), top_k=body.get("top_k", 0)))
    finish = "stop" if ids and ids[-1] in stops else "length"
    return Sample(engine.tokenizer.decode(ids), tuple(ids), tuple(lps), finish)


class Server:
    def __init__(self, engine, fail_first: int = 0, hang_s: float = 0.0):
        self.engine, self.fail_first, self.calls, self.bodies = engine, fail_first, 0, []
        self.reloads, self.hang_s, self.adapters = 0, hang_s, []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path.endswith(("/collective_rpc", "/load_lora_adapter")) and outer.hang_s:
                    import time

                    time.sleep(outer.hang_s)
                if self.path.endswith(("/load_lora_adapter", "/unload_lora_adapter")):
                    files = sorted(os.listdir(body["lora_path"])) if "lora_path" in body else []
                    with outer.lock:
                        outer.adapters.append((self.path.rsplit("/", 1)[-1], body["lora_name"], files))
                    self.send_response(200)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.path.endswith(("/collective_rpc", "/reset_prefix_cache")):
                    if self.path.endswith("/collective_rpc"):
                        from safetensors.torch import load_file

                        state = load_file(os.path.join(body["kwargs"]["weights_path"], "model.safetensors"))
                        with outer.lock:
                            outer.engine.model.load_state_dict(state)
                            outer.reloads += 1
                    self.send_response(200)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                with outer.lock:
                    outer.calls += 1
                    fail = outer.calls <= outer.fail_first
                    outer.bodies.append(body)
                    if not fail and isinstance(body["prompt"], list):  # token ids: one continuation
                        samples = [_continue(outer.engine, body)]
                    elif not fail:
                        samples = outer.engine.generate([body["prompt"]], body["n"], SamplingConfig(
                            temperature=body["temperature"], max_tokens=body["max_tokens"], seed=body.get("seed"),
                            stop=tuple(body.get("stop", ()))))[0].samples
                if fail:
                    self.send_response(500)
                    self.end_headers()
                    self.wfile.write(b"overloaded")
                    return
                choices = [{"index": i, "text": s.text, "finish_reason": s.finish_reason,
                            "logprobs": {"tokens": [f"token_id:{t}" for t in s.token_ids],
                                         "token_logprobs": list(s.logprobs)}} for i, s in enumerate(samples)]
                data = json.dumps({"choices": choices}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *e):
        self.stop()

    def stop(self):
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None
