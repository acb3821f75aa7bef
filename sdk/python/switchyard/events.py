"""A run's server-sent events (``GET /v1/jobs/{run_id}/events``), with automatic resume.

A dropped connection, a 5xx or 429 answer, or a connection attempt past its timeout is
followed by a reconnect that sends ``Last-Event-ID``, and ids already delivered are skipped,
so events arrive in order with none missed or repeated. A frame cut in the middle is never
delivered: an event is dispatched only at its blank line, and the reconnect asks for it again.
"""
from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Iterator, List, Optional
from urllib.parse import quote

from .errors import APIError, InvalidResponseError, NetworkError, StreamError, TimeoutError, api_error_from
from .types import Event, Job

if TYPE_CHECKING:
    from ._transport import Response, Transport

__all__ = ["EventStream", "EVENT_NAMES"]

EVENT_NAMES = frozenset({"status", "progress", "log", "output", "done"})
DEFAULT_MAX_RECONNECTS = 5
DEFAULT_RECONNECT_DELAY = 1.0


class _Cut(Exception):
    """The connection ended before done."""


class EventStream:
    """Iterate over it for the run's events; it ends after ``done``. Use it as a context
    manager, or call :meth:`close` (from any thread) when leaving early.

    ``last_event_id`` is the id of the last event delivered (pass it back to resume later),
    ``connections`` the number of connections opened, reconnects included.
    """

    def __init__(self, transport: "Transport", run_id: str, *, last_event_id: Optional[int] = None,
                 max_reconnects: int = DEFAULT_MAX_RECONNECTS, reconnect_delay: Optional[float] = None,
                 connect_timeout: Optional[float] = None, path: Optional[str] = None) -> None:
        self._t = transport
        #: A run's stream, or a batch's (``Client.stream_batch``: ``run_id`` is then the batch id).
        self._path = path or f"/v1/jobs/{_quote(run_id)}/events"
        self.run_id = run_id
        self.last_event_id = last_event_id
        self.max_reconnects = max(0, max_reconnects)
        self.reconnect_delay = reconnect_delay
        self.connect_timeout = connect_timeout
        self.connections = 0
        self._server_retry: Optional[float] = None
        self._res: Optional["Response"] = None
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._finished = False
        self._failures = 0

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Event]:
        return self

    def close(self) -> None:
        """Ends the stream and its connection; a ``next`` waiting in another thread returns
        (StopIteration) without an error."""
        self._closed.set()
        with self._lock:
            res = self._res
        if res is not None:
            res.shutdown()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def __next__(self) -> Event:
        if self._finished:
            raise StopIteration
        while True:
            if self._closed.is_set():
                self._end()
                raise StopIteration
            try:
                if self._res is None:
                    self._connect()
                ev = self._read()
                self._failures = 0
                if ev.event == "done":
                    self._end()  # nothing follows done
                return ev
            except StopIteration:
                raise
            except (_Cut, APIError, NetworkError, TimeoutError) as e:
                self._drop()
                if self._closed.is_set():
                    self._end()
                    raise StopIteration
                if isinstance(e, APIError) and not e.retryable:
                    self._end()
                    raise
                self._failures += 1
                if self._failures > self.max_reconnects:
                    self._end()
                    raise StreamError(self.run_id, self.last_event_id, self._failures, e) from e
                pause = self.reconnect_delay if self.reconnect_delay is not None else self._server_retry
                if pause is None:
                    pause = DEFAULT_RECONNECT_DELAY
                if isinstance(e, APIError) and e.retry_after and e.retry_after > pause:
                    pause = e.retry_after
                if self._closed.wait(pause):
                    self._end()
                    raise StopIteration

    def _end(self) -> None:
        self._finished = True
        self._drop()

    def _drop(self) -> None:
        with self._lock:
            res, self._res = self._res, None
        if res is not None:
            res.close()

    def _connect(self) -> None:
        self.connections += 1
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if self.last_event_id is not None:
            headers["Last-Event-ID"] = str(self.last_event_id)
        res = self._t.open("GET", self._path, headers=headers, timeout=self.connect_timeout)
        if res.status >= 400:
            try:
                body = res.raw.read()
            except Exception:
                body = b""
            res.close()
            raise api_error_from(res.status, res.headers, body)
        ctype = res.headers.get("Content-Type") or ""
        if not ctype.startswith("text/event-stream"):
            body = res.raw.read(64 << 10)
            res.close()
            raise InvalidResponseError(res.status, "invalid_response", f"{res.op} answered {ctype!r}, not text/event-stream",
                                       request_id=res.headers.get("X-Request-Id"), body=body)
        # The timeout bounds the wait for the headers only, never the stream itself.
        if res.sock is not None:
            res.sock.settimeout(None)
        with self._lock:
            self._res = res
        if self._closed.is_set():
            res.shutdown()

    def _read(self) -> Event:
        """Reads frames until one is a new event of a known name."""
        assert self._res is not None
        res = self._res
        ident: Optional[str] = None
        name = ""
        data: List[str] = []
        while True:
            try:
                raw = res.raw.readline()
            except Exception as e:
                raise NetworkError(res.op, e) from e
            if not raw.endswith(b"\n"):
                # The end of the connection, possibly in the middle of a frame: not delivered.
                raise _Cut("the stream ended before done")
            line = raw.decode("utf-8").rstrip("\r\n")
            if line == "":
                ev = self._accept(ident, name, data)
                if ev is not None:
                    return ev
                ident, name, data = None, "", []
                continue
            if line.startswith(":"):
                continue
            fld, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if fld == "id":
                ident = value
            elif fld == "event":
                name = value
            elif fld == "data":
                data.append(value)
            elif fld == "retry" and value.isdigit():
                self._server_retry = int(value) / 1000

    def _accept(self, ident: Optional[str], name: str, data: List[str]) -> Optional[Event]:
        if ident is None and not name and not data:
            return None
        n = 0
        if ident is not None and ident.isdigit():
            n = int(ident)
            if self.last_event_id is not None and n <= self.last_event_id:
                return None  # already delivered
            self.last_event_id = n
        if name not in EVENT_NAMES:
            return None
        text = "\n".join(data)
        try:
            payload = json.loads(text) if text else None
        except ValueError:
            payload = text
        job = None
        if name in ("status", "done") and isinstance(payload, dict):
            try:
                job = Job.from_json(payload)
            except ValueError:
                job = None
        return Event(id=n, event=name, data=payload, job=job)


def _quote(s: str) -> str:
    return quote(s, safe="")

