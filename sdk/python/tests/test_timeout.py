"""Timeouts: the client's default, a call's own, a submission's wait added to the default,
a stream's connection; network errors; and a held submission on the real gateway."""
from __future__ import annotations

import builtins
import socket
import threading
from typing import Any, Callable, Iterator

import pytest

from conftest import MISSING_RUN, STUCK
from switchyard import Client, NetworkError, StreamError, TimeoutError


@pytest.fixture
def silent() -> Iterator[str]:
    """A server that accepts connections and never answers until the test ends."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    stop = threading.Event()
    conns = []

    def accept() -> None:
        srv.settimeout(0.05)
        while not stop.is_set():
            try:
                conns.append(srv.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    t.join()
    for c in conns:
        c.close()
    srv.close()


def test_request_timeouts(silent: str) -> None:
    c = Client(silent, "k", timeout=0.1)
    with pytest.raises(TimeoutError) as e:
        c.get(MISSING_RUN)
    assert e.value.timeout == 0.1 and e.value.run_id is None and e.value.op == f"GET /v1/jobs/{MISSING_RUN}"
    assert isinstance(e.value, builtins.TimeoutError), "also the built-in TimeoutError"

    none = Client(silent, "k", timeout=None)
    with pytest.raises(TimeoutError) as e:
        none.capabilities(timeout=0.05)
    assert e.value.timeout == 0.05

    # The wait of a submission is added to the default timeout: the call outlasts it.
    with pytest.raises(TimeoutError) as e:
        c.submit("k", {}, wait=1)
    assert e.value.timeout == pytest.approx(1.1)

    # A stream's timeout bounds its connection, and then the reconnects give up.
    with pytest.raises(StreamError) as se:
        next(c.stream(MISSING_RUN, max_reconnects=0))
    assert isinstance(se.value.__cause__, TimeoutError)


def test_network_error() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(NetworkError) as e:
        Client(f"http://127.0.0.1:{port}", "k").get(MISSING_RUN)
    assert e.value.op == f"GET /v1/jobs/{MISSING_RUN}" and isinstance(e.value.__cause__, ConnectionRefusedError)


def test_gateway_timeout(client: Client, cancel_later: Callable[[str], None]) -> None:
    """A per-call timeout too short for a held submission, on the real gateway."""
    with pytest.raises(TimeoutError) as e:
        client.submit("inference:image:generate", {"prompt": "held"}, confidentiality=STUCK, wait=5, timeout=0.2,
                      headers={"X-Request-Id": "py-timeout-test"})
    assert e.value.timeout == 0.2
    # The run was accepted before the timeout fired; it is found and canceled.
    for job in client.jobs(kind="inference:image:generate", status="queued"):
        if job.confidentiality == STUCK:
            cancel_later(job.run_id)


def test_client_needs_a_url(monkeypatch: Any) -> None:
    monkeypatch.delenv("SWITCHYARD_URL", raising=False)
    with pytest.raises(ValueError):
        Client()
    with pytest.raises(ValueError):
        Client("ftp://example.com")
    monkeypatch.setenv("SWITCHYARD_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("SWITCHYARD_API_KEY", "sy_env")
    assert Client().base_url == "http://127.0.0.1:9"
