"""Fixtures of the client's tests. The gateway tests run against a real gateway with demo
workers serving every kind, which test/python-client.test.ts starts for them; without its
variables they are skipped, so a plain ``python3 -m pytest sdk/python/tests`` runs only the
offline tests. By hand::

    SWITCHYARD_TEST_URL=http://127.0.0.1:8080 SWITCHYARD_TEST_KEY=sy_... python3 -m pytest sdk/python/tests -q
"""
from __future__ import annotations

import http.server
import os
import struct
import sys
import threading
import zlib
from typing import Callable, Iterator, List, NamedTuple, Optional

import pytest

# The package of this checkout, not one installed elsewhere.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from switchyard import Client  # noqa: E402

ENV_URL = "SWITCHYARD_TEST_URL"  # the gateway's base URL
ENV_KEY = "SWITCHYARD_TEST_KEY"  # an account key with plenty of credits
ENV_POOR_KEY = "SWITCHYARD_TEST_POOR_KEY"  # an account key with 1 credit and no files
ENV_PROXY_URL = "SWITCHYARD_TEST_PROXY_URL"  # a TCP proxy to the gateway that cuts event streams
ENV_FILE_MAX = "SWITCHYARD_TEST_FILE_MAX_BYTES"
ENV_QUOTA = "SWITCHYARD_TEST_QUOTA_BYTES"

# Jobs of this tier stay queued: the test workers are open-tier, and an open worker never
# takes a trusted job. Tests that need a run that does not end use it.
STUCK = "trusted"
MISSING_RUN = "run_01HZZZZZZZZZZZZZZZZZZZZZZZ"


class Gateway(NamedTuple):
    url: str
    key: str
    poor_key: str
    proxy_url: str
    file_max: int
    quota: int

    def client(self, key: Optional[str] = None, **kw: object) -> Client:
        return Client(self.url, self.key if key is None else key, **kw)  # type: ignore[arg-type]


@pytest.fixture
def gateway() -> Gateway:
    url, key = os.environ.get(ENV_URL), os.environ.get(ENV_KEY)
    if not url or not key:
        pytest.skip(f"no gateway: set {ENV_URL} and {ENV_KEY} (test/python-client.test.ts does, around a real gateway with demo workers)")
    return Gateway(url, key, os.environ.get(ENV_POOR_KEY, ""), os.environ.get(ENV_PROXY_URL, ""),
                   int(os.environ.get(ENV_FILE_MAX) or 0), int(os.environ.get(ENV_QUOTA) or 0))


@pytest.fixture
def client(gateway: Gateway) -> Client:
    return gateway.client()


@pytest.fixture
def cancel_later(client: Client) -> Iterator[Callable[[str], None]]:
    """Cancels, when the test ends, runs that must not be left queued."""
    runs: List[str] = []
    yield runs.append
    for run_id in runs:
        try:
            client.cancel(run_id)
        except Exception:
            pass


def png_of(seed: int) -> bytes:
    """A small PNG whose pixels depend on seed, so uploads differ."""
    rows = b"".join(b"\x00" + b"".join(bytes(((x * 16 + seed) % 256, y * 16, (seed * 7) % 256)) for x in range(16)) for y in range(16))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 16, 16, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


class Scripted(NamedTuple):
    url: str
    requests: List[http.server.BaseHTTPRequestHandler]


@pytest.fixture
def scripted() -> Iterator[Callable[[Callable[[http.server.BaseHTTPRequestHandler], None]], Scripted]]:
    """A local HTTP server answering each request with the test's handler, for what a real
    gateway will not do on demand (every error code, a proxy's HTML page, silence)."""
    servers: List[http.server.ThreadingHTTPServer] = []

    def start(handle: Callable[[http.server.BaseHTTPRequestHandler], None]) -> Scripted:
        seen: List[http.server.BaseHTTPRequestHandler] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.body = self.rfile.read(length) if length else b""  # type: ignore[attr-defined]
                seen.append(self)
                handle(self)

            do_GET = do_POST = do_DELETE = _any

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        srv.daemon_threads = True
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return Scripted(f"http://127.0.0.1:{srv.server_address[1]}", seen)

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def answer(h: http.server.BaseHTTPRequestHandler, status: int, body: bytes, content_type: str = "application/json",
           headers: Optional[dict] = None) -> None:
    h.send_response(status)
    h.send_header("Content-Type", content_type)
    h.send_header("Content-Length", str(len(body)))
    for k, v in (headers or {}).items():
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(body)
