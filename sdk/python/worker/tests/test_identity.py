"""Protocol 5 identities: one name per Worker on every connection it makes, so a worker that
registers again is never counted twice; a second live process under the same name makes the first
stop; an instance older than 5 is registered with again without it."""
from __future__ import annotations

import asyncio
import re
import secrets
from typing import Any, List

import pytest
from conftest import wait_for
from scripted_gateway import IMAGE, ScriptedGateway, run

from switchyard_worker import Artifact, Worker, WorkerRefusedError


def test_every_register_of_a_worker_offers_protocol_5_and_carries_its_identity():
    async def test() -> None:
        async with ScriptedGateway() as gw:
            w = Worker(gw.url, "swt_t", handlers={IMAGE: lambda job: None})
            start = asyncio.ensure_future(w.start())
            first = await gw.register(protocol=5)
            await start
            assert first["protocol"] == [1, 2, 3, 4, 5, 6, 7]
            assert re.fullmatch(r"sdk-[0-9a-f]{24}", first["identity"]), first["identity"]
            # The socket dies: the next connection is the same worker, under the same name.
            await gw.conns[0]["ws"].close(1011, "gone")
            again = await gw.register(protocol=5, conn=1)
            assert again["identity"] == first["identity"]
            await w.stop(0)
            other = Worker(gw.url, "swt_t", handlers={IMAGE: lambda job: None})
            assert other.identity != w.identity, "a random name per Worker"
            assert Worker(gw.url, "swt_t", identity="gpu-box-7:slot.1").identity == "gpu-box-7:slot.1"
            with pytest.raises(ValueError, match="identity"):
                Worker(gw.url, "swt_t", identity="-not a name")

    run(test)


def test_an_instance_older_than_5_refusing_identity_gets_a_register_without_it_and_serves_the_worker():
    async def test() -> None:
        async with ScriptedGateway() as gw:
            w = Worker(gw.url, "swt_t", handlers={IMAGE: lambda job: None})
            start = asyncio.ensure_future(w.start())
            named = await gw.frame(lambda f: f["type"] == "register")
            assert "identity" in named
            await gw.send({"type": "error", "code": "bad_frame", "message": "invalid register frame: must NOT have additional properties"})
            await gw.conns[0]["ws"].close(4400, "bad register")
            unnamed = await gw.register(protocol=4, conn=1)
            await start
            assert "identity" not in unnamed and unnamed["protocol"] == [1, 2, 3, 4, 5, 6, 7]
            assert w.state == "running" and w.protocol == 4
            # And on every later connection to it.
            await gw.conns[1]["ws"].close(1011, "gone")
            assert "identity" not in await gw.register(protocol=4, conn=2)
            await w.stop(0)

    run(test)


def test_a_4409_close_stops_the_worker_as_superseded_even_without_its_error_frame():
    async def test() -> None:
        async with ScriptedGateway() as gw:
            w = Worker(gw.url, "swt_t", handlers={IMAGE: lambda job: None})
            start = asyncio.ensure_future(w.start())
            await gw.register(protocol=5)
            await start
            await gw.conns[0]["ws"].close(4409, "superseded")
            with pytest.raises(WorkerRefusedError) as e:
                await asyncio.wait_for(w.wait(), 5)
            assert (e.value.code, e.value.status) == ("superseded", 4409)
            assert len(gw.conns) == 1, "no reconnect: it would retire the other process in turn"

    run(test)


def test_a_second_live_worker_under_the_same_identity_takes_it_and_the_first_stops_refused(api, make_worker):
    identity = f"py-twin-{secrets.token_hex(4)}"
    ran: List[str] = []

    def handler(name: str) -> Any:
        def run_it(job: Any) -> Any:
            ran.append(name)
            return {"files": [Artifact("image.png", name.encode())]}

        return run_it

    first = make_worker({IMAGE: handler("first")}, identity=identity)
    second = make_worker({IMAGE: handler("second")}, identity=identity)
    wait_for("the first worker to stop", lambda: first.worker.state == "stopped")
    [(_, err)] = first.named("refused")
    assert isinstance(err, WorkerRefusedError)
    assert (err.code, err.status) == ("superseded", 4409)
    with pytest.raises(WorkerRefusedError):
        first.call(first.worker.wait())
    assert second.worker.connected and len(second.named("registered")) == 1
    wait_for("the fleet to count one worker", lambda: api.capacity()["workers"]["total"] == 1)
    run_id = api.submit(IMAGE, {"prompt": "who serves"})
    assert api.wait_job(run_id)["status"] == "succeeded"
    assert ran == ["second"]
    assert api.capacity()["workers"]["total"] == 1
