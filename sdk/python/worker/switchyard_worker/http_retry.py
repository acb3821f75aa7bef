"""Retries of the worker's HTTP calls to the gateway (uploads, input files). Blocking code: run it in a thread."""
from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional, Tuple, TypeVar, Union

#: Answers that may go away on their own: a timeout, rate limiting, a failing or busy gateway.
TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})

T = TypeVar("T")


class Aborted(Exception):
    """The lease ended (cancelled, lost, stopping) while an HTTP call was under way."""


def retry_after(header: Optional[str], cap: float) -> Optional[float]:
    """Retry-After in seconds (only the delta-seconds form), capped."""
    if not header:
        return None
    try:
        return min(max(0.0, float(header)), cap)
    except ValueError:
        return None


def read_error(status: int, body: bytes) -> Tuple[str, str]:
    """The gateway's error envelope ``{error: {code, message}}``, or ``http_<status>`` and the body's start."""
    text = body.decode("utf-8", "replace")
    try:
        error = json.loads(text).get("error")
        if isinstance(error, dict) and isinstance(error.get("code"), str):
            return error["code"], str(error.get("message") or text[:300])
    except (ValueError, AttributeError):
        pass
    return f"http_{status}", text[:300]


@dataclass
class Failure:
    """One failed try: the error, whether another try may help, and what to wait."""

    error: Exception
    retryable: bool
    outage: bool = False
    wait: Optional[float] = None


def with_retries(
    attempt: Callable[[], Union[T, Failure]],
    retries: int,
    base_delay: float,
    outage: float,
    aborted: Optional[threading.Event] = None,
) -> T:
    """Calls ``attempt`` until it succeeds, fails for good or the retries run out.

    A datastore outage on the gateway (503 ``unavailable``) is waited out for ``outage``
    seconds without spending the retries. Raises the last error, or Aborted.
    """
    outage_since: Optional[float] = None
    retried = 0
    while True:
        if aborted is not None and aborted.is_set():
            raise Aborted("the lease ended")
        result = attempt()
        if not isinstance(result, Failure):
            return result
        if result.outage and outage_since is None:
            outage_since = time.monotonic()
        waiting_out = result.outage and outage_since is not None and time.monotonic() - outage_since < outage
        if not result.retryable or (not waiting_out and retried >= retries):
            raise result.error
        if not waiting_out:
            retried += 1
        backoff = base_delay * 2 ** min(max(retried - 1, 0), 6)
        delay = result.wait if result.wait is not None else backoff / 2 + random.random() * backoff / 2
        if aborted is not None:
            if aborted.wait(delay):
                raise Aborted("the lease ended")
        else:
            time.sleep(delay)
