"""The asyncio variant: the same calls awaited, streams and waits that stop when their task
is canceled."""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable

import pytest

from conftest import MISSING_RUN, STUCK, Gateway
from switchyard import NotFoundError, TimeoutError
from switchyard.aio import AsyncClient


def test_async_submit_stream_wait_and_list(gateway: Gateway, cancel_later: Callable[[str], None]) -> None:
    async def main() -> None:
        async with AsyncClient(gateway.url, gateway.key) as client:
            run = await client.submit("inference:image:generate", {"prompt": "async"})
            async with client.stream(run.run_id) as stream:
                events = [ev async for ev in stream]
            assert events[0].event == "status" and events[-1].event == "done"
            assert [e.id for e in events] == list(range(events[0].id, events[0].id + len(events)))
            assert (await client.wait(run.run_id, interval=0.05, timeout=30)).status == "succeeded"

            run2 = await client.submit("inference:audio:sfx-generate", {"prompt": "async events"})
            job = await client.wait(run2.run_id, events=True, timeout=30)
            assert job.terminal and job.status == "succeeded" and job.raw == (await client.get(run2.run_id)).raw

            stuck = [await client.submit("inference:3d:text-to-mesh", {"prompt": f"async {i}"}, confidentiality=STUCK) for i in range(3)]
            for job in stuck:
                cancel_later(job.run_id)
            listed = [j.run_id async for j in client.jobs(kind="inference:3d:text-to-mesh", status="queued", limit=1)]
            assert listed == [j.run_id for j in reversed(stuck)]

            with pytest.raises(TimeoutError) as e:
                await client.wait(stuck[0].run_id, interval=0.02, timeout=0.3)
            assert e.value.run_id == stuck[0].run_id and e.value.last_job is not None and e.value.last_job.status == "queued"
            with pytest.raises(NotFoundError):
                await client.get(MISSING_RUN)
            assert (await client.capabilities())["kinds"] and (await client.capacity())["workers"]["total"] >= 1

    asyncio.run(main())


def test_a_canceled_task_closes_its_stream(scripted: Any) -> None:
    released = threading.Event()

    def handle(h: Any) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        h.wfile.write(b'id: 1\nevent: status\ndata: {"run_id":"run_x","status":"running"}\n\n')
        h.wfile.flush()
        try:
            while h.rfile.read(1):
                pass
        finally:
            released.set()
        h.close_connection = True

    srv = scripted(handle)

    async def main() -> None:
        client = AsyncClient(srv.url, "k")
        stream = client.stream("run_x")
        first = await stream.__anext__()
        assert first.event == "status"
        task = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(0)  # let it start waiting
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert stream.sync.closed

    asyncio.run(main())
    assert released.wait(10), "the connection was not released after the cancel"
