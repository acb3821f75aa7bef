"""The client of the gateway's HTTP API (docs/api.md)."""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence
from urllib.parse import quote

from ._transport import UNSET, Transport
from .errors import APIError, NetworkError, StreamError, TimeoutError
from .events import DEFAULT_MAX_RECONNECTS, EventStream
from .files import Files
from .batches import Batch, BatchSubmitted
from .types import Capabilities, Capacity, Job, JobPage

__all__ = ["Client", "JobIterator", "DEFAULT_TIMEOUT", "DEFAULT_POLL_INTERVAL"]

DEFAULT_TIMEOUT = 30.0
DEFAULT_POLL_INTERVAL = 1.0
_UNSET = UNSET


class Client:
    """A client of one gateway.

    ``base_url`` (``http://127.0.0.1:8080``) and ``api_key`` (``sy_...``) default to the
    environment's ``SWITCHYARD_URL`` and ``SWITCHYARD_API_KEY``. ``timeout`` is the default
    request timeout in seconds (None: none); every call takes its own ``timeout=`` too.
    A timeout bounds the connection and each wait for the gateway's bytes.
    """

    def __init__(self, base_url: Optional[str] = None, api_key: Optional[str] = None, *,
                 timeout: Optional[float] = DEFAULT_TIMEOUT, user_agent: str = "switchyard-python") -> None:
        url = base_url or os.environ.get("SWITCHYARD_URL")
        if not url:
            raise ValueError("the gateway's URL is required: pass base_url or set SWITCHYARD_URL")
        key = api_key if api_key is not None else os.environ.get("SWITCHYARD_API_KEY")
        self._transport = Transport(url, key or None, user_agent)
        self.timeout = timeout
        self.files = Files(self)

    @property
    def base_url(self) -> str:
        return self._transport.base_url

    def _timeout(self, timeout: Optional[float]) -> Optional[float]:
        return self.timeout if timeout is _UNSET else timeout

    # Jobs ------------------------------------------------------------------------------

    def submit(self, kind: str, input: Optional[Mapping[str, Any]] = None, *, confidentiality: Optional[str] = None,
               job_class: Optional[str] = None, webhook: Optional[str] = None, webhook_events_filter: Optional[List[str]] = None,
               idempotency_key: Optional[str] = None, wait: Optional[int] = None,
               max_attempts: Optional[int] = None, retry_on_timeout: Optional[bool] = None,
               timeout: Optional[float] = _UNSET, headers: Optional[Mapping[str, str]] = None) -> Job:
        """``POST /v1/jobs``: submits a job and returns the accepted job (status ``queued``).

        ``idempotency_key`` makes a retry safe: the same key and body answer the first run.
        ``wait`` (whole seconds, 0-60) sends ``Prefer: wait=N``: the answer is the finished job
        if the run ended within it (check ``job.terminal``). Without a ``timeout`` of the call,
        the wait is added to the client's default timeout. ``max_attempts`` and
        ``retry_on_timeout``: docs/jobs.md, "Attempts".
        """
        h: Dict[str, str] = dict(headers or {})
        if idempotency_key is not None:
            h["Idempotency-Key"] = idempotency_key
        t = self._timeout(timeout)
        if wait is not None:
            if isinstance(wait, bool) or not isinstance(wait, int) or not 0 <= wait <= 60:
                raise ValueError(f"wait takes whole seconds from 0 to 60, not {wait!r}")
            h["Prefer"] = f"wait={wait}"
            if timeout is _UNSET and t is not None:
                t += wait
        body: Dict[str, Any] = {"kind": kind, "input": dict(input or {})}
        for name, value in (("confidentiality", confidentiality), ("class", job_class), ("webhook", webhook),
                            ("webhook_events_filter", webhook_events_filter), ("max_attempts", max_attempts),
                            ("retry_on_timeout", retry_on_timeout)):
            if value is not None:
                body[name] = value
        _, data = self._transport.call("POST", "/v1/jobs", json_body=body, headers=h, timeout=t)
        return Job.from_json(data)

    def get(self, run_id: str, *, include: Optional[Sequence[str]] = None, timeout: Optional[float] = _UNSET,
            headers: Optional[Mapping[str, str]] = None) -> Job:
        """``GET /v1/jobs/{run_id}``: the job, ``terminal`` and ``raw`` included. ``include=["input"]``
        asks for the job's input too (``Job.input``), which the job object otherwise leaves out."""
        query = {"include": ",".join(include)} if include else None
        _, data = self._transport.call("GET", f"/v1/jobs/{quote(run_id, safe='')}", query=query, headers=headers, timeout=self._timeout(timeout))
        return Job.from_json(data)

    def cancel(self, run_id: str, *, timeout: Optional[float] = _UNSET, headers: Optional[Mapping[str, str]] = None) -> Job:
        """``POST /v1/jobs/{run_id}/cancel``. A queued run is canceled at once; a running one
        still shows ``running`` (follow it until terminal). A run already over raises
        :class:`AlreadyTerminalError`."""
        _, data = self._transport.call("POST", f"/v1/jobs/{quote(run_id, safe='')}/cancel", headers=headers, timeout=self._timeout(timeout))
        return Job.from_json(data)

    def list(self, *, status: Optional[str] = None, kind: Optional[str] = None, limit: Optional[int] = None,
             cursor: Optional[str] = None, timeout: Optional[float] = _UNSET, headers: Optional[Mapping[str, str]] = None,
             batch_id: Optional[str] = None) -> JobPage:
        """``GET /v1/jobs``: one page, newest first; ``next_cursor`` is None on the last page.
        ``batch_id`` lists only that batch's jobs."""
        query = {"status": status, "kind": kind, "batch_id": batch_id, "limit": limit, "cursor": cursor}
        _, data = self._transport.call("GET", "/v1/jobs", query=query,
                                       headers=headers, timeout=self._timeout(timeout))
        return JobPage(data=[Job.from_json(j) for j in data.get("data", [])], next_cursor=data.get("next_cursor"))

    def jobs(self, *, status: Optional[str] = None, kind: Optional[str] = None, limit: Optional[int] = None,
             timeout: Optional[float] = _UNSET, batch_id: Optional[str] = None) -> "JobIterator":
        """Every job matching the filters, newest first, page after page (``limit`` is the page
        size): ``for job in client.jobs(kind=...)``, or ``client.jobs(batch_id=...)``."""
        return JobIterator(self, status=status, kind=kind, limit=limit, timeout=timeout, batch_id=batch_id)

    # Batches (docs/jobs.md, "Batches") ----------------------------------------------------

    def submit_batch(self, jobs: List[Mapping[str, Any]], *, idempotency_key: Optional[str] = None,
                     timeout: Optional[float] = _UNSET, headers: Optional[Mapping[str, str]] = None) -> BatchSubmitted:
        """``POST /v1/jobs/batch``: up to 1,000 jobs, each the body of ``POST /v1/jobs``
        (``{"kind", "input", ...}``), all accepted or none. A refused batch raises
        :class:`InvalidRequestError` whose ``details["errors"]`` names each refused job by
        ``index``; a balance short of the total, :class:`InsufficientCreditsError`. File inputs
        are refused (submit such a job alone). ``idempotency_key`` covers the whole batch."""
        h: Dict[str, str] = dict(headers or {})
        if idempotency_key is not None:
            h["Idempotency-Key"] = idempotency_key
        answer: Dict[str, str] = {}
        _, data = self._transport.call("POST", "/v1/jobs/batch", json_body={"jobs": [dict(j) for j in jobs]}, headers=h,
                                       timeout=self._timeout(timeout), answer_headers=answer)
        return BatchSubmitted.from_json(data, answer.get("idempotent-replayed") == "true")

    def get_batch(self, batch_id: str, *, timeout: Optional[float] = _UNSET, headers: Optional[Mapping[str, str]] = None) -> Batch:
        """``GET /v1/batches/{batch_id}``: its jobs by status (list them with ``jobs(batch_id=...)``)."""
        _, data = self._transport.call("GET", f"/v1/batches/{quote(batch_id, safe='')}", headers=headers, timeout=self._timeout(timeout))
        return Batch.from_json(data)

    def cancel_batch(self, batch_id: str, *, timeout: Optional[float] = _UNSET, headers: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
        """``POST /v1/batches/{batch_id}/cancel``: every job not ended is canceled; the answer
        counts them (``canceled``, ``cancel_requested``, ``already_terminal``)."""
        _, data = self._transport.call("POST", f"/v1/batches/{quote(batch_id, safe='')}/cancel", headers=headers, timeout=self._timeout(timeout))
        return data  # type: ignore[no-any-return]

    def stream_batch(self, batch_id: str, *, last_event_id: Optional[int] = None, max_reconnects: int = DEFAULT_MAX_RECONNECTS,
                     reconnect_delay: Optional[float] = None, connect_timeout: Optional[float] = _UNSET) -> EventStream:
        """``GET /v1/batches/{batch_id}/events``: every job of the batch over one stream, a
        ``status`` event (``ev.job``) per job at first and per status change after, then ``done``
        whose ``data`` is the batch (:meth:`Batch.from_json`) once every job has ended. Resumes
        as :meth:`stream` does."""
        return EventStream(self._transport, batch_id, last_event_id=last_event_id, max_reconnects=max_reconnects,
                           reconnect_delay=reconnect_delay, connect_timeout=self._timeout(connect_timeout),
                           path=f"/v1/batches/{quote(batch_id, safe='')}/events")

    def wait(self, run_id: str, *, interval: float = DEFAULT_POLL_INTERVAL, timeout: Optional[float] = None,
             request_timeout: Optional[float] = _UNSET, events: bool = False) -> Job:
        """Waits until the run is terminal and returns the final job.

        It polls ``GET /v1/jobs/{run_id}`` every ``interval`` seconds, or follows the run's
        events with ``events=True``. 5xx, 429, network errors and request timeouts are tried
        again; other refusals (an unknown run's :class:`NotFoundError`) end it. ``timeout``
        bounds the whole wait (None: none): past it, :class:`TimeoutError` with ``run_id`` and
        ``last_job``; the run itself goes on. ``request_timeout`` bounds each request.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        state: Dict[str, Optional[Job]] = {"last": None}
        try:
            if events:
                return self._wait_events(run_id, deadline, self._timeout(request_timeout), state)
            return self._wait_polling(run_id, interval, deadline, self._timeout(request_timeout), state)
        except _Expired:
            raise TimeoutError(f"wait {run_id}", timeout, run_id=run_id, last_job=state["last"]) from None

    def _wait_polling(self, run_id: str, interval: float, deadline: Optional[float], request_timeout: Optional[float],
                      state: Dict[str, Optional[Job]]) -> Job:
        while True:
            pause = interval
            left = _left(deadline)
            t = request_timeout if left is None else left if request_timeout is None else min(request_timeout, left)
            try:
                job = self.get(run_id, timeout=t)
                state["last"] = job
                if job.terminal:
                    return job
            except (APIError, NetworkError, TimeoutError) as e:
                if isinstance(e, APIError) and not e.retryable:
                    raise
                if _left(deadline) == 0:
                    raise _Expired() from e
                if isinstance(e, APIError) and e.retry_after and e.retry_after > pause:
                    pause = e.retry_after
            left = _left(deadline)
            if left is not None:
                if left <= pause:
                    time.sleep(left)
                    raise _Expired()
            time.sleep(pause)

    def _wait_events(self, run_id: str, deadline: Optional[float], request_timeout: Optional[float],
                     state: Dict[str, Optional[Job]]) -> Job:
        stream = self.stream(run_id, connect_timeout=request_timeout)
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            stream.close()

        timer = None
        if deadline is not None:
            timer = threading.Timer(max(0.0, deadline - time.monotonic()), expire)
            timer.daemon = True
            timer.start()
        try:
            for ev in stream:
                if ev.job is not None:
                    state["last"] = ev.job
                    if ev.event == "done":
                        return ev.job
        except StreamError:
            if expired.is_set():
                raise _Expired() from None
            raise
        finally:
            if timer is not None:
                timer.cancel()
            stream.close()
        if expired.is_set():
            raise _Expired()
        raise StreamError(run_id, stream.last_event_id, 0, RuntimeError("the event stream ended without done"))

    def stream(self, run_id: str, *, last_event_id: Optional[int] = None, max_reconnects: int = DEFAULT_MAX_RECONNECTS,
               reconnect_delay: Optional[float] = None, connect_timeout: Optional[float] = _UNSET) -> EventStream:
        """``GET /v1/jobs/{run_id}/events``: the run's events as an iterator that ends after
        ``done``, resuming a dropped connection with ``Last-Event-ID`` (see :class:`EventStream`).

        ``last_event_id`` resumes after that event; ``max_reconnects`` failed connections in
        a row end it with :class:`StreamError`; ``reconnect_delay`` overrides the server's
        ``retry``; ``connect_timeout`` (the client's default unless given) bounds each
        connection attempt up to the answer's headers, never the stream.
        """
        return EventStream(self._transport, run_id, last_event_id=last_event_id, max_reconnects=max_reconnects,
                           reconnect_delay=reconnect_delay, connect_timeout=self._timeout(connect_timeout))

    # The fleet --------------------------------------------------------------------------

    def capabilities(self, *, timeout: Optional[float] = _UNSET, headers: Optional[Mapping[str, str]] = None) -> Capabilities:
        """``GET /v1/capabilities``: every kind, its input schema, outputs and live workers."""
        _, data = self._transport.call("GET", "/v1/capabilities", headers=headers, timeout=self._timeout(timeout))
        return data  # type: ignore[no-any-return]

    def capacity(self, *, timeout: Optional[float] = _UNSET, headers: Optional[Mapping[str, str]] = None) -> Capacity:
        """``GET /v1/network/capacity``: live fleet capacity (needs no key)."""
        _, data = self._transport.call("GET", "/v1/network/capacity", headers=headers, timeout=self._timeout(timeout))
        return data  # type: ignore[no-any-return]


class JobIterator:
    """Every job of a listing, page after page. ``pages`` counts the pages read; ``cursor`` is
    the cursor of the next page (None after the last)."""

    def __init__(self, client: Client, *, status: Optional[str], kind: Optional[str], limit: Optional[int], timeout: Optional[float],
                 batch_id: Optional[str] = None) -> None:
        self._c = client
        self._params: Dict[str, Any] = {"status": status, "kind": kind, "limit": limit, "batch_id": batch_id}
        self._timeout = timeout
        self._page: List[Job] = []
        self._last = False
        self.pages = 0
        self.cursor: Optional[str] = None

    def __iter__(self) -> Iterator[Job]:
        return self

    def __next__(self) -> Job:
        while not self._page:
            if self._last:
                raise StopIteration
            page = self._c.list(**self._params, cursor=self.cursor, timeout=self._timeout)
            self.pages += 1
            self._page = list(page.data)
            self.cursor = page.next_cursor
            self._last = page.next_cursor is None
        return self._page.pop(0)


class _Expired(Exception):
    pass


def _left(deadline: Optional[float]) -> Optional[float]:
    return None if deadline is None else max(0.0, deadline - time.monotonic())
