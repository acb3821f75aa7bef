"""Without a gateway: upload_artifact against a local HTTP server (hash check, retries, refusals), protocol helpers, backoff."""
from __future__ import annotations

import hashlib
import http.server
import json
import threading
from typing import Any, Callable, Iterator, List

import pytest

from switchyard_worker import Artifact, UploadError, UploadOptions, upload_artifact, worker_socket_url
from switchyard_worker.protocol import MAX_LOG_LINE, chunks, cut

FAST = UploadOptions(retries=2, retry_delay=0.01)


class Server:
    def __init__(self) -> None:
        self.answers: List[Callable[[bytes], Any]] = []
        self.seen: List[dict] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["content-length"]))
                outer.seen.append({"path": self.path, "auth": self.headers["authorization"], "type": self.headers["content-type"], "body": body})
                status, answer = outer.answers.pop(0)(body) if outer.answers else (500, {})
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1/leases/lse_1/artifacts"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.httpd.shutdown()


def stored(body: bytes, sha: str = "") -> Any:
    return 201, {"url": "http://127.0.0.1/v1/artifacts/x/a.png", "sha256": sha or hashlib.sha256(body).hexdigest(), "size": len(body), "content_type": "image/png"}


def test_streams_a_file_with_the_token_and_name_retrying_a_transient_503(server, tmp_path):
    data = bytes(range(256)) * 4000
    path = tmp_path / "my file.png"
    path.write_bytes(data)
    server.answers = [lambda b: (503, {"error": {"code": "busy", "message": "try later"}}), stored]
    up = upload_artifact(server.url, "tok", Artifact(path=path), FAST)
    assert up.sha256 == hashlib.sha256(data).hexdigest() and up.size == len(data)
    assert [s["body"] for s in server.seen] == [data, data], "sent again whole"
    assert server.seen[1]["path"] == "/v1/leases/lse_1/artifacts?name=my+file.png"
    assert server.seen[1]["auth"] == "Bearer tok"
    assert server.seen[1]["type"] == "application/octet-stream"


def test_refuses_an_answer_that_does_not_match_the_bytes_sent(server):
    server.answers = [lambda b: stored(b, "0" * 64)] * 3
    with pytest.raises(UploadError) as e:
        upload_artifact(server.url, "tok", Artifact("a.png", b"bytes", "image/png"), FAST)
    assert e.value.reason == "corrupted" and e.value.retryable
    assert len(server.seen) == 3, "a corrupted upload is tried again"


def test_a_refusal_is_final_and_not_retried(server):
    server.answers = [lambda b: (401, {"error": {"code": "unauthorized", "message": "the lease ended"}})]
    with pytest.raises(UploadError) as e:
        upload_artifact(server.url, "tok", Artifact("a.png", b"x"), FAST)
    assert (e.value.status, e.value.reason, e.value.retryable) == (401, "unauthorized", False)
    assert len(server.seen) == 1


def test_protocol_helpers():
    assert worker_socket_url("https://gw.example/base/") == "wss://gw.example/base/v1/workers/connect"
    assert worker_socket_url("http://127.0.0.1:8080") == "ws://127.0.0.1:8080/v1/workers/connect"
    with pytest.raises(ValueError):
        worker_socket_url("ftp://gw")
    assert cut("a😀b", 2) == "a", "never half a surrogate pair"
    assert "".join(chunks("x" * (MAX_LOG_LINE * 2 + 5), MAX_LOG_LINE)) == "x" * (MAX_LOG_LINE * 2 + 5)


def test_reconnect_backoff_grows_with_full_jitter_up_to_its_cap():
    from types import SimpleNamespace

    from switchyard_worker import ReconnectOptions
    from switchyard_worker.connection import GatewayConnection

    conn = GatewayConnection(SimpleNamespace(reconnect=ReconnectOptions(initial_delay=1, max_delay=8, factor=2)))  # type: ignore[arg-type]
    delays = [conn._next_delay() for _ in range(6)]
    for delay, cap in zip(delays, [1, 2, 4, 8, 8, 8]):
        assert 0 <= delay <= cap, (delays, cap)
    assert len({conn._next_delay() for _ in range(20)}) > 1, "jittered: a fleet does not reconnect in step"


def test_reconnect_delay_is_full_jitter_over_a_capped_exponential_bound() -> None:
    from switchyard_worker import ReconnectOptions
    from switchyard_worker.connection import reconnect_delay

    b = ReconnectOptions(initial_delay=0.25, max_delay=15.0, factor=2.0)
    # The lowest draw waits nothing, the highest the whole bound; the bound doubles up to max_delay.
    assert reconnect_delay(b, 0, lambda: 0.0) == 0.0
    assert [reconnect_delay(b, tries, lambda: 1.0) for tries in range(8)] == [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 15.0]
    # A fleet dropped at once (evenly spaced draws) spreads over the whole bound, not its upper half.
    draws = [reconnect_delay(b, 0, lambda i=i: i / 1000) for i in range(1000)]
    assert all(0 <= d < 0.25 for d in draws)
    assert sum(d < 0.125 for d in draws) == 500
