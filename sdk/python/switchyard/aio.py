"""An asyncio variant of the client: the same calls, awaited. Each request runs in a worker
thread (``asyncio.to_thread``) over the same standard-library transport, so it adds no
dependency; ``wait`` polls with ``asyncio.sleep`` and a stream is closed when the task that
reads it is canceled.

    async with AsyncClient() as client:
        run = await client.submit("inference:image:generate", {"prompt": "a lighthouse"})
        async for event in client.stream(run.run_id):
            print(event.event)
"""
from __future__ import annotations

import asyncio
import functools
from typing import Any, AsyncIterator, Callable, Dict, List, Optional, TypeVar

from ._transport import UNSET
from .client import DEFAULT_POLL_INTERVAL, Client, JobIterator
from .errors import APIError, NetworkError, StreamError, TimeoutError
from .batches import Batch, BatchSubmitted
from .events import EventStream
from .files import Files
from .types import Capabilities, Capacity, Event, File, FilePage, Job, JobPage

__all__ = ["AsyncClient", "AsyncEventStream", "AsyncFiles"]

T = TypeVar("T")


async def _run(fn: Callable[..., T], *args: Any, **kw: Any) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, functools.partial(fn, *args, **kw))


class AsyncClient:
    """Takes the arguments of :class:`Client`; every call is a coroutine with the same
    arguments and answers, and the same errors."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        self.sync = Client(*args, **kw)
        self.files = AsyncFiles(self.sync.files)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def submit(self, kind: str, input: Optional[Dict[str, Any]] = None, **kw: Any) -> Job:
        return await _run(self.sync.submit, kind, input, **kw)

    async def get(self, run_id: str, **kw: Any) -> Job:
        return await _run(self.sync.get, run_id, **kw)

    async def cancel(self, run_id: str, **kw: Any) -> Job:
        return await _run(self.sync.cancel, run_id, **kw)

    async def list(self, **kw: Any) -> JobPage:
        return await _run(self.sync.list, **kw)

    async def jobs(self, **kw: Any) -> AsyncIterator[Job]:
        """Every job of a listing, page after page: ``async for job in client.jobs(...)``."""
        it: JobIterator = self.sync.jobs(**kw)
        while True:
            job = await _run(next, it, None)
            if job is None:
                return
            yield job

    async def submit_batch(self, jobs: List[Dict[str, Any]], **kw: Any) -> BatchSubmitted:
        return await _run(self.sync.submit_batch, jobs, **kw)

    async def get_batch(self, batch_id: str, **kw: Any) -> Batch:
        return await _run(self.sync.get_batch, batch_id, **kw)

    async def cancel_batch(self, batch_id: str, **kw: Any) -> Dict[str, Any]:
        return await _run(self.sync.cancel_batch, batch_id, **kw)

    def stream_batch(self, batch_id: str, **kw: Any) -> "AsyncEventStream":
        return AsyncEventStream(self.sync.stream_batch(batch_id, **kw))

    async def capabilities(self, **kw: Any) -> Capabilities:
        return await _run(self.sync.capabilities, **kw)

    async def capacity(self, **kw: Any) -> Capacity:
        return await _run(self.sync.capacity, **kw)

    def stream(self, run_id: str, **kw: Any) -> "AsyncEventStream":
        return AsyncEventStream(self.sync.stream(run_id, **kw))

    async def wait(self, run_id: str, *, interval: float = DEFAULT_POLL_INTERVAL, timeout: Optional[float] = None,
                   request_timeout: Optional[float] = UNSET, events: bool = False) -> Job:
        """As :meth:`Client.wait`; canceling the task stops the wait (and its stream)."""
        last: List[Optional[Job]] = [None]
        try:
            return await asyncio.wait_for(self._wait(run_id, interval, request_timeout, events, last), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"wait {run_id}", timeout, run_id=run_id, last_job=last[0]) from None

    async def _wait(self, run_id: str, interval: float, request_timeout: Optional[float], events: bool,
                    last: List[Optional[Job]]) -> Job:
        if events:
            async with self.stream(run_id, connect_timeout=request_timeout) as stream:
                async for ev in stream:
                    if ev.job is not None:
                        last[0] = ev.job
                        if ev.event == "done":
                            return ev.job
            raise StreamError(run_id, stream.last_event_id, 0, RuntimeError("the event stream ended without done"))
        while True:
            pause = interval
            try:
                job = await self.get(run_id, timeout=request_timeout)
                last[0] = job
                if job.terminal:
                    return job
            except (APIError, NetworkError, TimeoutError) as e:
                if isinstance(e, APIError) and not e.retryable:
                    raise
                if isinstance(e, APIError) and e.retry_after and e.retry_after > pause:
                    pause = e.retry_after
            await asyncio.sleep(pause)


class AsyncEventStream:
    """A run's events: ``async for event in stream``. ``aclose()`` (or leaving ``async with``,
    or canceling the reading task) closes the connection."""

    def __init__(self, stream: EventStream) -> None:
        self.sync = stream

    @property
    def last_event_id(self) -> Optional[int]:
        return self.sync.last_event_id

    @property
    def connections(self) -> int:
        return self.sync.connections

    def __aiter__(self) -> "AsyncEventStream":
        return self

    async def __anext__(self) -> Event:
        try:
            ev = await _run(next, self.sync, None)
        except asyncio.CancelledError:
            self.sync.close()
            raise
        if ev is None:
            raise StopAsyncIteration
        return ev

    async def aclose(self) -> None:
        self.sync.close()

    async def __aenter__(self) -> "AsyncEventStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.sync.close()


class AsyncFiles:
    """``client.files`` of an :class:`AsyncClient`."""

    def __init__(self, files: Files) -> None:
        self.sync = files

    async def upload(self, data: Any, **kw: Any) -> File:
        return await _run(self.sync.upload, data, **kw)

    async def upload_file(self, path: Any, **kw: Any) -> File:
        return await _run(self.sync.upload_file, path, **kw)

    async def get(self, file_id: str, **kw: Any) -> File:
        return await _run(self.sync.get, file_id, **kw)

    async def list(self, **kw: Any) -> FilePage:
        return await _run(self.sync.list, **kw)

    async def content(self, file_id: str, **kw: Any) -> bytes:
        return await _run(self.sync.content, file_id, **kw)

    async def delete(self, file_id: str, **kw: Any) -> None:
        await _run(self.sync.delete, file_id, **kw)
