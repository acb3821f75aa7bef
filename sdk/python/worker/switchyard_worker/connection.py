"""The worker's socket to the gateway: connect with the token, register, heartbeats, frames, backoff.

It knows sockets, not leases: what a closed socket means for the leases is the worker's call.
Works with websockets' asyncio client (13 and later) and with the legacy client (10 to 12).
"""
from __future__ import annotations

import asyncio
import json
import random
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set, Tuple

from websockets.exceptions import ConnectionClosed

from .errors import WorkerRefusedError
from .protocol import MAX_HEARTBEAT_LEASES, SUPERSEDED_CLOSE, SUPERSEDED_CODE
from .types import ReconnectOptions

try:  # websockets >= 13
    from websockets.asyncio.client import connect as _ws_connect

    _HEADERS_ARG = "additional_headers"
except ImportError:  # websockets 10 to 12: the legacy client
    from websockets.client import connect as _ws_connect  # type: ignore[no-redef]

    _HEADERS_ARG = "extra_headers"

if TYPE_CHECKING:  # pragma: no cover
    from .worker import Worker

# 4409: another live process registered with this worker's identity; reconnecting would retire it in turn.
FATAL_CLOSE_CODES = frozenset({4400, 4401, 4403, SUPERSEDED_CLOSE})
#: Error codes that, before registration, mean "try again later" rather than "you are refused".
TRANSIENT_ERROR_CODES = frozenset({"internal", "unavailable", "attestation_timeout"})
#: A registration that lasted this long resets the reconnect backoff.
STABLE_AFTER = 10.0


def reconnect_delay(backoff: ReconnectOptions, failed_tries: int, rand: Callable[[], float] = random.random) -> float:
    """The wait before the next connection try, after ``failed_tries`` tries that did not hold:
    "full jitter", uniformly between 0 and min(max_delay, initial_delay * factor ** failed_tries).
    A restarting gateway instance drops all its workers at once; drawing over the whole bound
    (not its upper half) spreads their registrations over twice the time (bench/fleet.ts)."""
    cap = min(backoff.max_delay, backoff.initial_delay * backoff.factor ** failed_tries)
    return rand() * cap


class _Binary:
    """A pipeline frame queued for the socket, and the future settled once it is written out."""

    __slots__ = ("data", "written")

    def __init__(self, data: bytes, written: "asyncio.Future[None]") -> None:
        self.data = data
        self.written = written

    def fail(self) -> None:
        if not self.written.done():
            self.written.set_exception(ConnectionError("the connection to the gateway closed before the pipeline frame was sent"))


class Connection:
    """One socket. A reconnect makes a new one; the leases it carried may outlive it (a move)."""

    def __init__(self) -> None:
        self.ws: Any = None
        self.registered = False
        self.closed = False
        self.closing = False
        self.draining = False
        self.heartbeat = 5.0
        self.timers: List[Any] = []
        self.last_seen = time.monotonic()
        #: Leases received on this socket and not yet settled.
        self.leases: Set[str] = set()
        self.refusal: Optional[Dict[str, Any]] = None
        self.last_error: Optional[str] = None
        #: Closed by us to reconnect at once (drained, moving).
        self.reconnect_now = False
        #: The gateway sent ``reconnect``: its leases move to the next connection (protocol 2).
        self.moving = False
        #: The register frame claimed leases (``resume``).
        self.claimed = False
        #: The register frame carried an ``identity`` (protocol 5).
        self.identified = False
        #: The protocol version ``registered`` agreed on (0 before).
        self.protocol = 0
        self.task: Optional["asyncio.Task[None]"] = None
        self._queue: "asyncio.Queue[Any]" = asyncio.Queue()
        #: Protocol 6: bytes of pipeline frames received and not yet taken by their handlers. Past
        #: a limit the socket is not read (``reading`` is clear) until they take half of it, so a
        #: slow rank slows its senders through TCP (rank_stream.py) instead of growing in memory.
        self.rank_buffered = 0
        self.reading = asyncio.Event()
        self.reading.set()

    def send(self, frame: Dict[str, Any]) -> bool:
        """Queues a frame; frames go out in the order sent. False once the socket is closing."""
        if self.closed or self.closing or self.ws is None:
            return False
        self._queue.put_nowait(json.dumps(frame, separators=(",", ":"), allow_nan=False))
        return True

    def send_binary(self, data: bytes) -> "Optional[asyncio.Future[None]]":
        """Queues a binary frame in order with the JSON ones; the future settles once the socket
        took it (websockets waits for the transport's buffer to drain: the socket's back-pressure).
        None once the socket is closing."""
        if self.closed or self.closing or self.ws is None:
            return None
        written: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Binary(data, written))
        return written

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Closes after the frames already queued have gone out."""
        if self.closed or self.closing:
            return
        self.closing = True
        self.reading.set()
        if self.ws is None:
            self.terminate()
        else:
            self._queue.put_nowait((code, reason))

    def terminate(self) -> None:
        """Drops the connection without a close handshake."""
        self.reading.set()
        if self.ws is not None:
            transport = getattr(self.ws, "transport", None)
            if transport is not None:
                transport.abort()
        elif self.task is not None:
            self.task.cancel()

    async def sender(self) -> None:
        item: Any = None
        try:
            while True:
                item = await self._queue.get()
                if isinstance(item, tuple):
                    await self.ws.close(*item)
                    return
                if isinstance(item, _Binary):
                    await self.ws.send(item.data)
                    if not item.written.done():
                        item.written.set_result(None)
                else:
                    await self.ws.send(item)
        except ConnectionClosed:
            return
        finally:
            if isinstance(item, _Binary):
                item.fail()

    def fail_unsent(self) -> None:
        """The socket closed: pipeline frames still queued were never sent, and their senders hear it."""
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if isinstance(item, _Binary):
                item.fail()


def _refusal_of(err: BaseException) -> Optional[Tuple[int, bytes]]:
    """The HTTP status (and body) of a refused upgrade, from either websockets API."""
    status = getattr(err, "status_code", None)
    body = b""
    response = getattr(err, "response", None)
    if status is None and response is not None:
        status = getattr(response, "status_code", None)
        body = getattr(response, "body", b"") or b""
    return (int(status), body) if isinstance(status, int) else None


class GatewayConnection:
    def __init__(self, worker: "Worker") -> None:
        self.worker = worker
        self.current: Optional[Connection] = None
        self._failed_tries = 0
        self._reconnect: Optional[asyncio.TimerHandle] = None

    def open(self) -> None:
        if not self.worker.may_connect():
            return
        conn = Connection()
        self.current = conn
        conn.task = asyncio.ensure_future(self._run(conn))

    def cancel_reconnect(self) -> None:
        if self._reconnect is not None:
            self._reconnect.cancel()
            self._reconnect = None

    async def _run(self, conn: Connection) -> None:
        log = self.worker.log
        log.debug("connecting to %s", self.worker.url)
        try:
            kwargs: Dict[str, Any] = {
                _HEADERS_ARG: {"Authorization": f"Bearer {self.worker.token}"},
                "open_timeout": 15,
                "ping_interval": None,
                "close_timeout": 5,
                "max_size": 16 * 1024 * 1024,
            }
            conn.ws = await _ws_connect(self.worker.url, **kwargs)
        except asyncio.CancelledError:
            conn.last_error = "stopped while connecting"
            self._on_close(conn, 1006, "")
            return
        except Exception as err:  # refused upgrade, DNS, refused connection, timeout...
            refused = _refusal_of(err)
            if refused is not None:
                status, body = refused
                code, message = f"http_{status}", f"the gateway answered the upgrade with HTTP {status}"
                try:
                    error = json.loads(body).get("error") or {}
                    code, message = error.get("code") or code, error.get("message") or message
                except (ValueError, AttributeError):
                    if status == 401:
                        code, message = "unauthorized", "the gateway refused the worker token (HTTP 401)"
                conn.refusal = {"code": code, "message": message, "status": status}
            else:
                conn.last_error = str(err) or type(err).__name__
            self._on_close(conn, 1006, "")
            return
        if conn.closing:
            conn.terminate()
        frame = self.worker.register_frame()
        conn.claimed = bool(frame.get("resume"))
        conn.identified = "identity" in frame
        conn.send(frame)
        sender = asyncio.ensure_future(conn.sender())
        try:
            async for raw in conn.ws:
                conn.last_seen = time.monotonic()
                if not isinstance(raw, str):
                    self.worker.on_pipeline_frame(conn, raw)
                    if not conn.reading.is_set():
                        log.debug("not reading the socket while %d bytes of pipeline frames wait for their handlers", conn.rank_buffered)
                        await conn.reading.wait()
                    continue
                try:
                    message = json.loads(raw)
                except ValueError:
                    log.warning("ignoring a frame from the gateway that is not JSON")
                    continue
                if not isinstance(message, dict) or not isinstance(message.get("type"), str):
                    log.warning("ignoring a frame from the gateway without a type")
                    continue
                try:
                    self.worker.on_frame(conn, message)
                except Exception:
                    log.exception("could not handle a %s frame from the gateway", message.get("type"))
        except (ConnectionClosed, asyncio.CancelledError):
            pass
        except Exception as err:
            conn.last_error = str(err)
        finally:
            sender.cancel()
        code = conn.ws.close_code if conn.ws.close_code is not None else 1006
        self._on_close(conn, code, conn.ws.close_reason or "")

    def registered(self, conn: Connection, heartbeat: float) -> None:
        """Heartbeats start; once the registration holds a while the backoff starts over."""
        conn.registered = True
        conn.heartbeat = heartbeat
        conn.last_seen = time.monotonic()
        conn.timers.append(asyncio.ensure_future(self._heartbeats(conn)))
        conn.timers.append(asyncio.get_running_loop().call_later(STABLE_AFTER, self._stable))

    def _stable(self) -> None:
        self._failed_tries = 0

    def refused(self, conn: Connection, refusal: Dict[str, Any]) -> None:
        """An error frame before registration: the reason the socket is about to be refused."""
        conn.refusal = refusal
        # The gateway closes a refused registration itself, except a malformed register frame.
        conn.timers.append(asyncio.get_running_loop().call_later(0.5, conn.close, 1000, "refused"))

    async def _heartbeats(self, conn: Connection) -> None:
        while not conn.closed:
            await asyncio.sleep(conn.heartbeat)
            if conn.closed:
                return
            # The gateway answers pings (and every report); one silent over three beats is gone.
            # Not while this worker stops reading for a rank's unread frames: the silence is its own.
            if conn.reading.is_set() and time.monotonic() - conn.last_seen > 3 * conn.heartbeat + 1:
                self.worker.log.warning("the gateway stopped answering; reconnecting")
                conn.terminate()
                return
            conn.send({"type": "heartbeat", "leases": list(conn.leases)[:MAX_HEARTBEAT_LEASES]})
            try:
                pong = await conn.ws.ping()
                pong.add_done_callback(lambda f: self._pong(conn, f))
            except Exception:
                pass  # closing

    @staticmethod
    def _pong(conn: Connection, f: "asyncio.Future[Any]") -> None:
        if not f.cancelled() and f.exception() is None:
            conn.last_seen = time.monotonic()

    def _on_close(self, conn: Connection, code: int, reason: str) -> None:
        if conn.closed:
            return
        conn.closed = True
        conn.reading.set()
        conn.fail_unsent()
        for t in conn.timers:
            t.cancel()
        if self.current is conn:
            self.current = None
        self.worker.on_socket_closed(conn)
        conn.leases.clear()

        log = self.worker.log
        refusal = conn.refusal
        # An older instance refuses a register with fields it does not know as a bad frame:
        # `identity` (before protocol 5) is left out of the next register first, then `resume`
        # (protocol 1): those leases cannot move there (they lapse and are requeued).
        claim_refused = (conn.claimed or conn.identified) and not conn.registered and refusal is not None and refusal.get("code") == "bad_frame"
        if claim_refused:
            if conn.identified:
                self.worker.on_identity_refused()
            else:
                self.worker.mover.lose_moves("the gateway instance cannot take leases back (protocol 1)")
            conn.reconnect_now = True
        superseded = code == SUPERSEDED_CLOSE or (refusal is not None and refusal.get("code") == SUPERSEDED_CODE)
        fatal = not claim_refused and (
            superseded
            or code in FATAL_CLOSE_CODES
            or (refusal is not None and refusal.get("status") in (401, 403))
            or (refusal is not None and refusal.get("status") is None and not conn.registered and refusal.get("code") not in TRANSIENT_ERROR_CODES)
        )
        if fatal and self.worker.is_running():
            status = refusal.get("status") if refusal and refusal.get("status") is not None else (SUPERSEDED_CLOSE if superseded else code)
            detail = refusal["message"] if refusal else (reason or "no reason given")
            # A 4409 whose error frame was lost is still a twin's doing.
            why = refusal["code"] if refusal else (SUPERSEDED_CODE if superseded else None)
            err = WorkerRefusedError(f"the gateway refused this worker ({status}{' ' + why if why else ''}): {detail}", why or "refused", int(status))
            log.error("%s", err)
            self.worker.emit("disconnected", {"code": code, "reason": reason, "reconnect_in": None})
            self.worker.on_refused(err)
            return
        if self.worker.may_connect():
            if conn.reconnect_now:
                delay = 0.0
            elif self.worker.mover.size > 0:
                delay = self.worker.mover.next_delay()
            else:
                delay = self._next_delay()
            why = (refusal or {}).get("message") or conn.last_error or reason or f"close code {code}"
            if conn.moving:
                log.info("reconnecting to move %d lease(s)", self.worker.mover.size)
            elif conn.registered:
                log.warning("disconnected from the gateway (%s, %s); reconnecting in %.2f s", code, why, delay)
            else:
                log.warning("could not connect to the gateway (%s); retrying in %.2f s", why, delay)
            self.worker.emit("disconnected", {"code": code, "reason": reason or why, "reconnect_in": delay})
            self._reconnect = asyncio.get_running_loop().call_later(delay, self.open)
        else:
            self.worker.emit("disconnected", {"code": code, "reason": reason, "reconnect_in": None})
            self.worker.check_stopped()

    def _next_delay(self) -> float:
        delay = reconnect_delay(self.worker.reconnect, self._failed_tries)
        self._failed_tries += 1
        return delay
