"""Event streams: from status to done, resume after an id, a connection cut mid-frame by
the proxy, refusals, reconnects that give up, partial frames, close from another thread."""
from __future__ import annotations

import threading
from typing import Any, List, Optional

import pytest

from conftest import MISSING_RUN, Gateway, answer
from switchyard import Client, Event, EventStream, NotFoundError, StreamError, UnavailableError


def collect(stream: EventStream) -> List[Event]:
    with stream:
        return list(stream)


def summary(events: List[Event]) -> List[Any]:
    return [(e.id, e.event, e.data) for e in events]


def assert_consecutive(events: List[Event]) -> None:
    """ids 1 apart: nothing missed, nothing repeated."""
    ids = [e.id for e in events]
    assert ids == list(range(ids[0], ids[0] + len(ids))), summary(events)


def test_stream_from_status_to_done_and_resume(client: Client) -> None:
    run = client.submit("inference:image:generate", {"prompt": "streamed"})
    events = collect(client.stream(run.run_id))
    assert len(events) >= 2 and events[0].event == "status" and events[-1].event == "done", summary(events)
    assert_consecutive(events)
    progress = [e for e in events if e.event == "progress"]
    assert len(progress) >= 3 and all(0 <= (e.progress or 0) <= 1 for e in progress), summary(events)
    done = events[-1].job
    assert done is not None and done.terminal and done.status == "succeeded" and done.output and done.output.urls
    assert events[0].job is not None and events[0].job.run_id == run.run_id

    # Resuming after an id gives exactly the events after it.
    after = events[1].id
    resumed = collect(client.stream(run.run_id, last_event_id=after))
    assert summary(resumed) == summary(events[2:])

    # A run already over: status, done, the end.
    late = collect(client.stream(run.run_id))
    assert [e.event for e in late] == ["status", "done"]


def test_stream_resumes_after_the_connection_is_cut(gateway: Gateway, client: Client) -> None:
    """The proxy cuts the first events connection of a run in the middle of its first progress
    frame; the stream reconnects with Last-Event-ID and nothing is missed or repeated."""
    if not gateway.proxy_url:
        pytest.skip("no cutting proxy: set SWITCHYARD_TEST_PROXY_URL")
    proxied = Client(gateway.proxy_url, gateway.key)
    run = client.submit("inference:image:generate", {"prompt": "cut me"})
    stream = proxied.stream(run.run_id, reconnect_delay=0.01)
    events = collect(stream)
    assert stream.connections >= 2, f"the stream was not cut (one connection): {summary(events)}"
    assert events[0].event == "status" and events[-1].event == "done", summary(events)
    assert_consecutive(events)
    # What the cut stream delivered equals an uncut replay of the log after its first event.
    replay = collect(client.stream(run.run_id, last_event_id=events[0].id))
    assert summary(events[1:]) == summary(replay)
    assert any(e.event == "progress" for e in events), "the progress frame that was cut never arrived"

    # wait(events=True) goes through the same resume.
    run2 = client.submit("inference:image:generate", {"prompt": "cut me too"})
    job = proxied.wait(run2.run_id, events=True, timeout=30)
    assert job.status == "succeeded" and job.terminal


def test_stream_refusals(client: Client) -> None:
    stream = client.stream(MISSING_RUN)
    with pytest.raises(NotFoundError):
        next(stream)
    assert stream.connections == 1, "a 404 ends the stream at once"
    assert list(stream) == []


def test_stream_gives_up_after_max_reconnects(scripted: Any) -> None:
    """Repeated 5xx: the first try and max_reconnects more, each with Last-Event-ID, then a
    StreamError to resume from."""
    srv = scripted(lambda h: answer(h, 503, b'{"error":{"code":"unavailable","message":"down"}}'))
    stream = Client(srv.url, "k").stream(MISSING_RUN, max_reconnects=2, reconnect_delay=0.001, last_event_id=4)
    with pytest.raises(StreamError) as e:
        next(stream)
    err = e.value
    assert isinstance(err.__cause__, UnavailableError)
    assert err.run_id == MISSING_RUN and err.last_event_id == 4 and err.attempts == 3 and len(srv.requests) == 3
    for r in srv.requests:
        assert r.headers["Last-Event-ID"] == "4" and r.headers["Accept"] == "text/event-stream" and r.headers["Authorization"] == "Bearer k"


def test_stream_parser_skips_partial_frames_and_repeats(scripted: Any) -> None:
    """A frame cut before its blank line is never delivered, and ids already delivered are
    skipped when the server sends them again."""
    resumed_with: List[Optional[str]] = []

    def handle(h: Any) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        h.end_headers()
        if len(resumed_with) == 0:
            resumed_with.append(None)
            h.wfile.write(b'retry: 1\n\n: ping\n\nid: 1\nevent: status\ndata: {"run_id":"run_x","status":"running"}\n\n'
                          b'id: 2\r\nevent: progress\r\ndata: {"progress":0.5}\r\n\r\nid: 3\nevent: log\ndata: {"line":"cut')
        else:
            resumed_with.append(h.headers["Last-Event-ID"])
            h.wfile.write(b'id: 2\nevent: progress\ndata: {"progress":0.5}\n\nid: 3\nevent: log\ndata: {"line":"whole","ts":"t"}\n\n'
                          b'id: 4\nevent: mystery\ndata: {}\n\nid: 5\nevent: done\ndata: {"run_id":"run_x","status":"succeeded"}\n\n')
        h.wfile.flush()
        h.close_connection = True

    srv = scripted(handle)
    stream = Client(srv.url, "k").stream("run_x")
    events = collect(stream)
    assert summary(events) == [
        (1, "status", {"run_id": "run_x", "status": "running"}),
        (2, "progress", {"progress": 0.5}),
        (3, "log", {"line": "whole", "ts": "t"}),
        (5, "done", {"run_id": "run_x", "status": "succeeded"}),
    ]
    assert resumed_with == [None, "2"] and stream.last_event_id == 5
    assert events[2].message == "whole" and events[3].job is not None and events[3].job.terminal


def test_stream_closed_from_another_thread(scripted: Any) -> None:
    """close() stops a stream that waits for events, from another thread, without an error,
    and releases the connection."""
    released = threading.Event()

    def handle(h: Any) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        h.wfile.write(b'id: 1\nevent: status\ndata: {"run_id":"run_x","status":"running"}\n\n')
        h.wfile.flush()
        try:
            while h.rfile.read(1):  # until the client hangs up
                pass
        finally:
            released.set()
        h.close_connection = True

    srv = scripted(handle)
    stream = Client(srv.url, "k").stream("run_x")
    first = next(stream)
    assert first.event == "status" and first.job is not None and first.job.status == "running"
    timer = threading.Timer(0.05, stream.close)
    timer.start()
    assert list(stream) == []
    assert released.wait(10), "the connection was not released after close"
    timer.join()

