"""The reward process: users' reward code runs in a child process of its own, in that process's main thread.

Why a process: trials run in a thread of a warm Ray worker, and reward code that uses signal-based
timeouts (``math_verify.parse`` and ``verify`` with their defaults, and every open-r1 or TRL reward that
calls them) works only in a main thread. A process per task also loads each reward file afresh (an
edited file is never served from a warm worker's modules) and keeps one sweep's modules, ``sys.path``
entries and globals away from the next one's.

``RewardProcess(specs)`` starts ``python -m workers.rewards.process``, which builds the terms
(workers.rewards.loading) and then answers ``score`` and ``check`` requests over two pipes with pickled
messages (``multiprocessing.connection``); the child's stdout and stderr are the worker's, so a reward
that prints does not disturb the protocol. It ends when its parent closes the pipes (or dies).
"""

from __future__ import annotations

import os
import subprocess
import sys
import weakref
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

from workers.rewards.builtin import NEEDS_MAIN_THREAD
from workers.rewards.terms import RewardBatch, RewardError, compute_rewards

_PLAIN = (str, int, float, bool, type(None))


class RewardTimeout(RewardError):
    """The reward process did not answer in time (it was stopped)."""


def needs_process(specs: Sequence[dict[str, Any]]) -> bool:
    """Whether the entries need the reward process: a user function, a reward server (checked at submit by a request
    from where trials run, as every call to a user's code is), or a built-in that needs a main thread."""
    return any(s.get("function") or s.get("url") or s.get("name") in NEEDS_MAIN_THREAD for s in specs)


class RewardProcess:
    """The reward terms of ``specs``, built and called in a child process (see the module docstring).

    Raises (on construction):
        RewardError: a term cannot be loaded or its factory fails (``index``: its position in specs), or the
            process did not answer within ``timeout_s``.
    """

    def __init__(self, specs: Sequence[dict[str, Any]], timeout_s: float | None = None) -> None:
        child_in, to_child = os.pipe()
        from_child, child_out = os.pipe()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "workers.rewards.process", str(child_in), str(child_out)],
            pass_fds=(child_in, child_out),
            stdin=subprocess.DEVNULL,
        )
        os.close(child_in)
        os.close(child_out)
        self._send = Connection(to_child, readable=False)
        self._recv = Connection(from_child, writable=False)
        self._closer = weakref.finalize(self, _stop, self._proc, self._send, self._recv)
        built = self._ask(("build", list(specs)), timeout_s)
        self.names: list[tuple[str, str]] = [(name, key) for name, key, _ in built]
        self.conventions: list[str] = [convention for _, _, convention in built]  # what convention: auto took

    def score(self, kwargs: dict[str, Any], n: int) -> RewardBatch:
        """compute_rewards in the child. Raises RewardError (a function failed, or the process died)."""
        return self._ask(("score", kwargs, n), None)

    def check(
        self, kwargs: dict[str, Any], n: int, timeout_s: float | None = None, rows_at: list[int] | None = None
    ) -> RewardError | None:
        """Call each term alone on a batch of n (``rows_at``: each one's row index in the data, for messages); the
        first term's failure (with its index, check_terms), or None."""
        return self._ask(("check", kwargs, n, rows_at), timeout_s)

    def references(
        self, rows: list[dict[str, Any]], prompt_column: str, state: Any = None, timeout_s: float | None = None
    ) -> RewardError | None:
        """The first term that gives no row's reference answer a positive score (workers.rewards.reference), or None."""
        return self._ask(("reference", rows, prompt_column, state), timeout_s)

    def close(self) -> None:
        """Stop the child (it is also stopped when this object is garbage collected)."""
        self._closer()

    def _ask(self, message: tuple, timeout_s: float | None) -> Any:
        try:
            self._send.send(message)
            if timeout_s is not None and not self._recv.poll(timeout_s):
                self._proc.kill()  # busy in user code: waiting for it to notice the closed pipe is no use
                self.close()
                raise RewardTimeout(f"the reward functions did not answer within {timeout_s:g} s")
            kind, value = self._recv.recv()
        except (EOFError, OSError):
            code = self._proc.wait(timeout=5) if self._proc.poll() is None else self._proc.returncode
            self.close()
            raise RewardError(f"the reward process ended (exit code {code}) while running the reward functions") from None
        if kind == "error":
            raise value
        return value


def _stop(proc: subprocess.Popen, *pipes: Connection) -> None:
    for pipe in pipes:
        pipe.close()  # the child's recv sees EOF and it returns
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # busy in a reward call: it is not waited for
        proc.kill()
        proc.wait()


def check_terms(terms: list, kwargs: dict[str, Any], n: int, rows_at: list[int] | None = None) -> RewardError | None:
    """Call each term alone; the first failure as a RewardError with the term's index, else None. An import of a
    missing module (a dispatcher importing the scorer of a row's data_source when it meets one) is said with the pip
    command and the first row that reaches it: its data_source and its index in the data (``rows_at``, else in the
    batch)."""
    for i, term in enumerate(terms):
        try:
            compute_rewards([term], kwargs, n)
        except RewardError as e:
            return RewardError(f"{_hinted(e)}{_missing_on(term, kwargs, n, rows_at) if _missing(e) else ''}", i)
    return None


def _missing(e: BaseException) -> ModuleNotFoundError | None:
    """The ModuleNotFoundError behind a reward's error (its cause, or the cause's), or None."""
    seen: BaseException | None = e
    while seen is not None and not isinstance(seen, ModuleNotFoundError):
        seen = seen.__cause__ or seen.__context__
    return seen


def _hinted(e: RewardError) -> str:
    """The error's message with the pip command of a missing module it comes from (once)."""
    from workers.rewards.loading import missing_package_hint

    missing = _missing(e)
    return str(e) if missing is None or "pip install" in str(e) else f"{e}{missing_package_hint(missing)}"


def _missing_on(term: Any, kwargs: dict[str, Any], n: int, rows_at: list[int] | None) -> str:
    """`` (row R of the data, data_source S)``: the first row whose call alone imports a missing module; '' if none."""
    for r in range(n):
        one = {k: [v[r]] if isinstance(v, list) and len(v) == n else v for k, v in kwargs.items()}
        try:
            compute_rewards([term], one, 1)
        except RewardError as e:
            if _missing(e) is not None:
                source = (kwargs.get("data_source") or [None] * n)[r]
                return f" (reached on row {rows_at[r] if rows_at else r} of the data, data_source {source!r})"
    return ""


def _plain(batch: RewardBatch) -> RewardBatch:
    """The batch with log_extra values that may not pickle (or not show in a table) as text."""
    extras = {k: [v if isinstance(v, _PLAIN) else str(v) for v in values] for k, values in batch.extras.items()}
    return RewardBatch(batch.rewards, batch.per_function, batch.abstained, batch.logged, extras)


def serve(inbox: Connection, outbox: Connection) -> None:
    """The child's loop: ``build`` the terms, then answer ``score``, ``check`` and ``reference`` until the parent
    closes."""
    from workers.rewards.loading import build_terms

    terms: list = []
    specs: list = []
    while True:
        try:
            message = inbox.recv()
        except (EOFError, OSError):
            return
        try:
            if message[0] == "build":
                specs, terms = message[1], build_terms(message[1])
                reply: Any = [(t.name, t.key, t.convention) for t in terms]
            elif message[0] == "score":
                reply = _plain(compute_rewards(terms, message[1], message[2]))
            elif message[0] == "reference":
                from workers.rewards.reference import reference_failure

                reply = reference_failure(terms, specs, message[1], message[2], state=message[3])
            else:
                reply = check_terms(terms, *message[1:])
            outbox.send(("ok", reply))
        except RewardError as e:
            outbox.send(("error", RewardError(_hinted(e), e.index)))
        except Exception as e:  # noqa: BLE001 - reported to the parent, which names the reward
            outbox.send(("error", RewardError(f"{type(e).__name__}: {str(e)[:500]}")))


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False))
