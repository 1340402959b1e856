"""HTTP client for the CLI (httpx). Reads GROUPSCALE_URL, GROUPSCALE_API_TOKEN and GROUPSCALE_WAIT_S."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import httpx

DEFAULT_URL = "http://127.0.0.1:8000"


class ApiError(RuntimeError):
    """A non-2xx answer. status: HTTP code; detail: the JSON ``detail`` (str or list of errors); url: the controller's;
    token_sent: whether the request carried a bearer token."""

    def __init__(self, status: int, detail: Any, is_json: bool = True, url: str = "", token_sent: bool = False) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status, self.detail, self.is_json, self.url, self.token_sent = status, detail, is_json, url, token_sent


class TokenError(ValueError):
    """GROUPSCALE_API_TOKEN cannot be a bearer token (blank, or a character a header cannot carry)."""


def bearer_token(raw: str | None) -> str | None:
    """The API token as sent and compared, on both sides: surrounding whitespace stripped (a secret file's trailing
    newline); None when unset.

    Raises:
        TokenError: set but blank (an empty secret file would otherwise open the API), or holding a character
            outside printable ASCII (no HTTP header can carry it).
    """
    if raw is None:
        return None
    token = raw.strip()
    if not token:
        raise TokenError("set but blank; set the token (e.g. `openssl rand -hex 32`) or unset it")
    if not all(" " <= c <= "~" for c in token):
        raise TokenError(
            "holds a control or non-ASCII character, which no HTTP header can carry; "
            "use printable ASCII (e.g. `openssl rand -hex 32`)"
        )
    return token


CHECKED_POST_S = 90.0  # a submit, probe or extend: the server checks the rewards on the cluster (up to 60 s) first
# A controller that refuses connections is waited for this long: `groupscale up` answered in 15-30 s on a quiet machine
# and in up to 49 s on a busy one (README), so a command typed right after it does not give up first.
WAIT_S = 120.0


class Client:
    def __init__(
        self, url: str | None = None, token: str | None = None, timeout_s: float = 30.0, wait_s: float | None = None
    ) -> None:
        """wait_s: how long a refused connection (a controller still starting) is retried, in seconds (default
        $GROUPSCALE_WAIT_S or WAIT_S; 0: not at all). Only refused connections are retried: nothing was sent.

        Raises:
            httpx.InvalidURL: the URL (url, else $GROUPSCALE_URL) is malformed or not http(s) with a host.
            TokenError: the token (token, else $GROUPSCALE_API_TOKEN; stripped: bearer_token) is blank or unsendable.
        """
        self.url = (url or os.environ.get("GROUPSCALE_URL") or DEFAULT_URL).rstrip("/")
        parsed = httpx.URL(self.url)  # raises httpx.InvalidURL for a malformed one
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise httpx.InvalidURL(f"{self.url!r} must start with http:// or https:// and name a host")
        token = bearer_token(token if token is not None else os.environ.get("GROUPSCALE_API_TOKEN"))
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.token_sent = token is not None
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s)
        self.wait_s = float(os.environ.get("GROUPSCALE_WAIT_S", WAIT_S)) if wait_s is None else wait_s
        self._reached = False  # once the controller answered, a refused connection is an outage, not a start

    def _request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """One request; while the controller refuses connections (it is starting), tried again every 0.5 s for up
        to ``wait_s``, saying so once on stderr. Raises httpx.ConnectError when it never answers."""
        deadline = time.monotonic() + self.wait_s
        told = False
        while True:
            try:
                r = self._http.request(method, path, **kw)
                self._reached = True
                return r
            except httpx.ConnectError:
                if self._reached or time.monotonic() >= deadline:
                    raise
                if not told:
                    print(f"waiting up to {self.wait_s:.0f} s for the controller at {self.url} to start ...", file=sys.stderr)
                    told = True
                time.sleep(0.5)

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        r = self._request(method, path, **kw)
        if r.status_code >= 400:
            try:
                body = r.json()
            except ValueError:
                raise ApiError(r.status_code, r.text[:200], False, self.url, self.token_sent) from None
            detail = body.get("detail", body) if isinstance(body, dict) else body
            raise ApiError(r.status_code, detail, True, self.url, self.token_sent)
        return r.json()

    def submit(self, spec: dict, idempotency_key: str | None = None, attempts: int = 3) -> dict:
        """POST /v1/sweeps. With an Idempotency-Key, a request whose answer was lost (connection reset,
        timeout) is sent again up to ``attempts`` times: the server answers a replay with the sweep the
        first one stored, so a retried submit never makes two sweeps."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        for attempt in range(attempts if idempotency_key else 1):
            try:
                return self._call("POST", "/v1/sweeps", json=spec, headers=headers, timeout=CHECKED_POST_S)
            except httpx.TransportError:
                if attempt == attempts - 1 or not idempotency_key:
                    raise
                time.sleep(0.5 * 2**attempt)
        raise AssertionError("unreachable")

    def sweeps(self) -> list[dict]:
        return self._call("GET", "/v1/sweeps")

    def sweep(self, sweep_id: str) -> dict:
        return self._call("GET", f"/v1/sweeps/{sweep_id}")

    def delete(self, sweep_id: str) -> dict:
        return self._call("DELETE", f"/v1/sweeps/{sweep_id}", params={"purge": "true"})

    def extend(self, sweep_id: str, group_sizes: list[int], seeds: list[int]) -> dict:
        body = {"group_sizes": group_sizes, "seeds": seeds}
        return self._call("POST", f"/v1/sweeps/{sweep_id}/extend", json=body, timeout=CHECKED_POST_S)

    def trials(self, sweep_id: str) -> list[dict]:
        return self._call("GET", f"/v1/sweeps/{sweep_id}/trials")

    def fit(self, sweep_id: str, answer: str | None = None) -> dict:
        """The sweep's fit; ``answer``: an answer id its message cites (the server's default: the latest of its spec)."""
        return self._call("GET", f"/v1/sweeps/{sweep_id}/fit", params={"answer": answer} if answer else None)

    def cancel(self, sweep_id: str) -> dict:
        return self._call("DELETE", f"/v1/sweeps/{sweep_id}")

    def recommend(self, task: str, model: str, samples_per_step: int | None = None) -> dict:
        params = {"task": task, "model": model}
        if samples_per_step is not None:
            params["samples_per_step"] = str(samples_per_step)
        return self._call("GET", "/v1/recommendations", params=params)

    def probe(self, spec: dict) -> dict:
        return self._call("POST", "/v1/probes", json=spec, timeout=CHECKED_POST_S)

    def get_probe(self, probe_id: str) -> dict:
        return self._call("GET", f"/v1/probes/{probe_id}")

    def answer(self, spec: dict) -> dict:
        return self._call("POST", "/v1/answers", json=spec, timeout=CHECKED_POST_S)

    def get_answer(self, answer_id: str) -> dict:
        return self._call("GET", f"/v1/answers/{answer_id}")

    def health(self) -> dict:
        return self._call("GET", "/v1/health")
