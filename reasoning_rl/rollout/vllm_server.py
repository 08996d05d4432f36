"""A local `vllm serve` process for the `openai` engine: started, waited for, and stopped with its children.

    with local_vllm_server(python, model_dir, name, log_path) as url:   # http://127.0.0.1:PORT/v1
        ...

The server runs in dev mode (VLLM_SERVER_DEV_MODE=1), so the engine's weight pushes reach its
`reload_weights`; on a machine without a GPU it is vLLM's CPU build (`make vllm-env` builds one in
`.venv-vllm`). A server that exits or does not answer /health in `start_timeout` seconds is an error
carrying the end of its log. Not here: the engine itself (openai.py).
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def local_vllm_server(python: str, model_dir: str, name: str, log_path: str, max_model_len: int = 256,
                      start_timeout: float = 400.0, extra_env: dict | None = None):
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "HOME": os.path.dirname(os.path.abspath(log_path)), "VLLM_TARGET_DEVICE": "cpu",
           "VLLM_SERVER_DEV_MODE": "1", **(extra_env or {})}
    log = open(log_path, "w")
    server = subprocess.Popen([python, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir,
                               "--served-model-name", name, "--host", "127.0.0.1", "--port", str(port),
                               "--dtype", "float32", "--max-model-len", str(max_model_len),
                               "--gpu-memory-utilization", "0.2"], env=env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        deadline = time.time() + start_timeout
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"vllm server exited ({server.returncode}): {_tail(log_path)}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                if time.time() > deadline:
                    raise RuntimeError(f"vllm server did not answer in {start_timeout:.0f} s: {_tail(log_path)}")
                time.sleep(2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()


def _tail(path: str, n: int = 2000) -> str:
    with open(path, errors="replace") as f:
        return f.read()[-n:]
