"""Rank leases (protocol 6, docs/worker-protocol.md "Ranks"): ``JobRank``, what a handler sees
of its pipeline, and the routing of the gateway's pipeline frames to it.

A rank lease has two streams of binary frames: the one it receives (from rank ``i - 1``; rank 0
from the last rank) and the one it sends (to rank ``i + 1``; the last rank back to rank 0). The
gateway relays them, so a worker only ever talks to the gateway. Frames that arrive before the
handler reads them (before it even starts) wait here, in order.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, AsyncIterator, Deque, Iterator, List, Optional, Union

from .errors import JobCancelled, WorkerError
from .pipeline_frame import PipelineFrame, PipelineFrameError, decode_pipeline_frame, encode_pipeline_frame
from .protocol import MAX_PIPELINE_PAYLOAD

if TYPE_CHECKING:  # pragma: no cover
    from .connection import Connection
    from .lease import LeaseRunner
    from .lease_state import LeaseState

#: Bytes of pipeline frames a connection holds for handlers that have not read them yet. Past it
#: the worker stops reading its socket until they took half (the gateway does the same with its
#: own buffer, RANK_BUFFER_BYTES), so a slow rank slows the ranks sending to it.
RANK_BUFFER_BYTES = 4 * 1024 * 1024

_WAIT = object()
_END = object()


class JobRank:
    """``job.rank`` of a rank lease: which stage of which pipeline it is, and its frames.

    - ``index``, ``count``, ``pipeline_id``, ``model``, ``workers``, ``first`` (rank 0: it alone
      has ``job.input``), ``last`` (rank ``count - 1``: it alone reports output and files).
    - ``frames()``: the payloads the rank before sends (rank 0: the last rank), as bytes, in
      order; ``async for`` in an async handler, ``for`` in a sync one. It ends after that rank's
      ``end``, and raises JobCancelled once the lease is cancelled or lost.
    - ``send(payload)``: to the next rank (the last rank: back to rank 0). In an async handler
      ``await job.rank.send(b)`` (done once the socket took it); in a sync one it blocks as long.
    - ``end()``: ends this rank's stream. Idempotent; the SDK calls it when the handler returns.
    """

    def __init__(self, lease: "LeaseState", loop: asyncio.AbstractEventLoop, log: logging.Logger) -> None:
        rank = lease.info.rank
        assert rank is not None
        self._lease = lease
        self._loop = loop
        self._log = log
        self._loop_thread = threading.get_ident()
        self.index: int = rank.index
        self.count: int = rank.count
        self.pipeline_id: str = rank.pipeline_id
        self.model: str = rank.model
        self.workers: List[str] = list(rank.workers)
        self.first: bool = rank.index == 0
        self.last: bool = rank.index == rank.count - 1
        # The incoming stream: filled on the loop's thread, read from the handler's (either).
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._incoming: Deque[bytes] = deque()
        self._in_seq = 0
        self._in_ended = False
        self._error: Optional[BaseException] = None
        self._waiters: List["asyncio.Future[None]"] = []
        self._frames = _Frames(self)
        # The outgoing stream: loop thread only.
        self._out_seq = 0
        self._out_ended = False

    def __repr__(self) -> str:
        return f"<JobRank {self.index} of {self.count} of {self.model} ({self.pipeline_id})>"

    # -- the incoming stream --------------------------------------------------------------------

    def frames(self) -> "_Frames":
        """The incoming payloads: ``async for p in job.rank.frames()`` or ``for p in job.rank.frames()``.

        One stream: every call gives the same iterator, and each payload comes out once. An
        ``end`` frame's payload comes out when it is not empty.
        """
        return self._frames

    def _on_loop(self) -> bool:
        return threading.get_ident() == self._loop_thread

    def _take(self) -> Any:
        """Under the lock: the next payload, _END, _WAIT, or the error raised."""
        if self._error is not None:
            raise self._error
        if self._incoming:
            return self._incoming.popleft()
        return _END if self._in_ended else _WAIT

    async def _next_async(self) -> Any:
        if not self._on_loop():
            raise RuntimeError("`async for` over job.rank.frames() works in async handlers; a sync handler iterates it with `for`")
        while True:
            with self._lock:
                item = self._take()
            if item is not _WAIT:
                if item is not _END:
                    self._release(len(item))
                return item
            waiter = self._loop.create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def _next_blocking(self) -> Any:
        if self._on_loop():
            raise RuntimeError("an async handler iterates job.rank.frames() with `async for`: `for` would block the worker's event loop")
        with self._arrived:
            item = self._take()
            while item is _WAIT:
                self._arrived.wait()
                item = self._take()
        if item is not _END:
            try:
                self._loop.call_soon_threadsafe(self._release, len(item))
            except RuntimeError:
                pass  # the loop is closed: nothing reads the socket any more
        return item

    def _wake(self) -> None:
        """Loop thread, the lock held: readers waiting on either side look again."""
        self._arrived.notify_all()
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _receive(self, frame: PipelineFrame) -> None:
        """A frame the gateway relayed to this lease (loop thread)."""
        log = self._log
        with self._lock:
            if self._error is not None:
                return
            if self._in_ended:
                log.warning("lease %s: a pipeline frame (seq %d) after the end of its incoming stream, dropped", self._lease.info.lease_id, frame.seq)
                return
            if frame.seq != self._in_seq + 1:
                # Frames are never acknowledged nor sent again: one missing is the pipeline broken.
                self._error = WorkerError(f"pipeline frame {frame.seq} reached lease {self._lease.info.lease_id} after frame {self._in_seq}: the pipeline is broken", "pipeline_broken", True)
                self._discard_locked()
                self._wake()
                return
            self._in_seq = frame.seq
            if frame.payload or not frame.end:
                self._incoming.append(frame.payload)
                self._hold(len(frame.payload))
            self._in_ended = frame.end
            self._wake()

    # -- buffer accounting (loop thread) ---------------------------------------------------------

    def _hold(self, n: int) -> None:
        conn = self._lease.conn
        conn.rank_buffered += n
        if conn.rank_buffered > RANK_BUFFER_BYTES and conn.reading.is_set():
            conn.reading.clear()

    def _release(self, n: int) -> None:
        conn = self._lease.conn
        conn.rank_buffered = max(0, conn.rank_buffered - n)
        if not conn.reading.is_set() and conn.rank_buffered <= RANK_BUFFER_BYTES // 2:
            # The socket was not read meanwhile: the gateway's silence was this worker's doing.
            conn.last_seen = time.monotonic()
            conn.reading.set()

    def _discard_locked(self) -> None:
        held = sum(len(p) for p in self._incoming)
        self._incoming.clear()
        if held:
            self._release(held)

    def close(self, error: BaseException) -> None:
        """The lease is over (cancelled, lost, or its handler returned): readers get ``error``,
        the frames it did not read are let go, and nothing more is sent (loop thread)."""
        with self._lock:
            if self._error is None:
                self._error = error
            self._discard_locked()
            self._wake()
        self._out_ended = True

    # -- the outgoing stream -------------------------------------------------------------------

    def send(self, payload: Union[bytes, bytearray, memoryview]) -> "Optional[asyncio.Future[None]]":
        """Sends ``payload`` to the next rank (the last rank: to rank 0); see the class."""
        if not isinstance(payload, (bytes, bytearray, memoryview)):
            raise TypeError(f"a pipeline frame's payload is bytes, not {type(payload).__name__}")
        data = bytes(payload)
        if len(data) > MAX_PIPELINE_PAYLOAD:
            raise ValueError(f"a pipeline frame's payload is at most {MAX_PIPELINE_PAYLOAD} bytes, this one is {len(data)}")
        return self._from_any_thread(data, False)

    def end(self) -> "Optional[asyncio.Future[None]]":
        """Ends this rank's stream (a frame with the end flag and no payload); idempotent, and
        nothing to do once the lease is over."""
        return self._from_any_thread(b"", True)

    def _from_any_thread(self, data: bytes, end: bool) -> "Optional[asyncio.Future[None]]":
        if self._on_loop():
            return self._send_now(data, end)

        async def send() -> None:
            await self._send_now(data, end)

        coro = send()
        try:
            future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        except RuntimeError as err:  # the loop is closed: the worker is gone
            coro.close()
            raise JobCancelled(self._lease.cause or "the worker stopped") from err
        try:
            future.result()
        except concurrent.futures.CancelledError as err:
            raise JobCancelled(self._lease.cause or "the worker stopped") from err
        return None

    def _send_now(self, data: bytes, end: bool) -> "asyncio.Future[None]":
        """Loop thread: numbers the frame and queues it on the lease's socket."""
        if end and self._out_ended:
            return _settled(self._loop)
        if self._error is not None and self._lease.cause:
            if end:
                return _settled(self._loop)
            raise JobCancelled(self._lease.cause)
        if self._out_ended:
            raise RuntimeError(f"rank {self.index} of {self.count} has ended its stream: it sends nothing more")
        lease = self._lease
        self._out_seq += 1
        self._out_ended = end
        written = lease.conn.send_binary(encode_pipeline_frame(lease.info.lease_id, lease.info.fence, self._out_seq, end, data))
        if written is None:
            raise JobCancelled(lease.cause or "the connection to the gateway closed")
        # Read here too, so a frame nobody awaited that failed is not logged as never retrieved.
        written.add_done_callback(lambda f: f.cancelled() or f.exception())
        return written


class _Frames:
    """The incoming stream as an iterator of either kind (``JobRank.frames()``)."""

    def __init__(self, rank: JobRank) -> None:
        self._rank = rank

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self  # type: ignore[return-value]

    async def __anext__(self) -> bytes:
        item = await self._rank._next_async()
        if item is _END:
            raise StopAsyncIteration
        return item  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[bytes]:
        return self  # type: ignore[return-value]

    def __next__(self) -> bytes:
        item = self._rank._next_blocking()
        if item is _END:
            raise StopIteration
        return item  # type: ignore[no-any-return]


def _settled(loop: asyncio.AbstractEventLoop) -> "asyncio.Future[None]":
    done: "asyncio.Future[None]" = loop.create_future()
    done.set_result(None)
    return done


def route_pipeline_frame(runner: "LeaseRunner", conn: "Connection", data: bytes) -> None:
    """A binary frame from the gateway: to the rank lease it names, if this worker holds it."""
    try:
        frame = decode_pipeline_frame(data)
    except PipelineFrameError as err:
        runner.log.warning("ignoring a binary frame from the gateway: %s", err)
        return
    lease = runner.leases.get(frame.lease_id)
    if lease is None or lease.rank is None or lease.conn is not conn:
        runner.log.warning("ignoring a pipeline frame for lease %s: not a rank lease this connection holds", frame.lease_id)
        return
    if frame.fence != lease.info.fence:
        runner.log.warning("ignoring a pipeline frame for lease %s of fence %d (the lease's is %d)", frame.lease_id, frame.fence, lease.info.fence)
        return
    lease.rank._receive(frame)
