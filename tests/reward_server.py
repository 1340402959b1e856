"""A reward server of our own for the tests: a FastAPI app on 127.0.0.1, run as a process (``python -m
tests.reward_server PORT``), whose paths answer the ways a reward server answers and fails.

- ``/json``: groupscale's plain request (``prompts, completions, <columns>``): 1.0 where the completion contains the
  row's ``answer`` (or ``solution``), else 0.0, as a list;
- ``/openrlhf``: OpenRLHF's request (``query, prompts, labels``, openrlhf/cli/serve_rm.py): the same scores as
  ``{"rewards", "scores", "extra_logs"}``;
- ``/status/500``, ``/status/422``: that status; ``/slow``: answers after 5 s; ``/short``: one score too few;
  ``/nan``: NaN scores; ``/flaky/K``: 503 for the first K requests, then ``/json``'s answer;
- ``/hits``: how many requests each path got (GET).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

app = FastAPI()
hits: Counter = Counter()


def _scores(completions: list, answers: list) -> list[float]:
    return [1.0 if str(a) in str(c) else 0.0 for c, a in zip(completions, answers)]


@app.get("/hits")
async def count() -> dict:
    return dict(hits)


@app.post("/{path:path}")
async def reward(path: str, request: Request) -> Response:
    hits[path] += 1
    body = await request.json()
    if path == "openrlhf":
        scores = _scores(body["query"], body["labels"])
        return JSONResponse({"rewards": scores, "scores": scores, "extra_logs": {"server_mean": scores}})
    if path.startswith("status/"):
        return Response("the server failed", status_code=int(path.split("/")[1]))
    if path == "slow":
        await asyncio.sleep(5)
    if path.startswith("flaky/") and hits[path] <= int(path.split("/")[1]):
        return Response("busy", status_code=503)
    scores = _scores(body["completions"], body.get("answer") or body["solution"])
    if path == "short":
        scores = scores[:-1]
    if path == "nan":
        return Response(str([float("nan")] * len(scores)).replace("nan", "NaN"), media_type="application/json")
    return JSONResponse(scores)


@contextmanager
def running(port: int) -> Iterator[str]:
    """The server as a process on 127.0.0.1:port while the block runs; yields its base URL."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.reward_server", str(port)], stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        import httpx

        for _ in range(300):
            try:
                httpx.get(f"{base}/hits", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        else:
            raise RuntimeError(f"the test reward server did not start on port {port}")
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
