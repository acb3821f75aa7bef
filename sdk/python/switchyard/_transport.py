"""One HTTP exchange with the gateway over http.client: the request, the answer's status,
headers and body, and the mapping of failures to the client's errors."""
from __future__ import annotations

import http.client
import json
import socket
import urllib.parse
from typing import Any, BinaryIO, Dict, Mapping, Optional, Tuple, Union

from .errors import InvalidResponseError, NetworkError, TimeoutError, api_error_from

Body = Union[bytes, BinaryIO, None]

#: "The client's default timeout": the default of every call's ``timeout``.
UNSET: Any = object()


class Response:
    """An open answer whose body has not been read (events, file content)."""

    def __init__(self, conn: http.client.HTTPConnection, sock: Optional[socket.socket], res: http.client.HTTPResponse, op: str) -> None:
        self.conn = conn
        # The connection's socket, kept apart: http.client forgets it for an answer that ends
        # with the connection, and a stream still needs it (its timeout, a shutdown on close).
        self.sock = sock
        self.raw = res
        self.op = op
        self.status = res.status
        self.headers: Mapping[str, str] = res.headers

    def close(self) -> None:
        try:
            self.raw.close()
        finally:
            self.conn.close()

    def shutdown(self) -> None:
        """Ends the connection at once, from any thread: a read waiting on it returns."""
        if self.sock is not None:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Transport:
    def __init__(self, base_url: str, api_key: Optional[str], user_agent: str) -> None:
        u = urllib.parse.urlsplit(base_url.rstrip("/"))
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"the gateway URL must be http(s)://host[:port]: {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.scheme = u.scheme
        self.host = u.hostname
        self.port = u.port
        self.prefix = u.path
        self.api_key = api_key
        self.user_agent = user_agent

    def open(self, method: str, path: str, *, query: Optional[Mapping[str, Any]] = None, body: Body = None,
             headers: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None) -> Response:
        """Sends a request and reads the answer's status and headers. ``timeout`` (seconds, None
        for none) bounds the connection and each wait for the server's bytes."""
        op = f"{method} {path}"
        target = self.prefix + path
        q = {k: str(v) for k, v in (query or {}).items() if v is not None}
        if q:
            target += "?" + urllib.parse.urlencode(q)
        h: Dict[str, str] = {"User-Agent": self.user_agent, "Accept": "application/json"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        h.update(headers or {})
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        conn = cls(self.host, self.port, timeout=timeout)
        try:
            if isinstance(body, (bytes, bytearray)):
                h.setdefault("Content-Length", str(len(body)))
            conn.request(method, target, body=body, headers=h, encode_chunked=body is not None and not isinstance(body, (bytes, bytearray)) and "Content-Length" not in h)
            sock = conn.sock
            res = conn.getresponse()
        except Exception as e:
            conn.close()
            raise _failure(op, timeout, e) from e
        return Response(conn, sock, res, op)

    def call(self, method: str, path: str, *, query: Optional[Mapping[str, Any]] = None, json_body: Any = None,
             body: Body = None, headers: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None,
             answer_headers: Optional[Dict[str, str]] = None) -> Tuple[int, Any]:
        """A whole exchange: the status and the JSON of a 2xx answer (None for 204), else raises
        the answer's :class:`APIError`. ``answer_headers``, given, is filled with the answer's headers."""
        h = dict(headers or {})
        if json_body is not None:
            body = json.dumps(json_body, separators=(",", ":")).encode("utf-8")
            h.setdefault("Content-Type", "application/json")
        res = self.open(method, path, query=query, body=body, headers=h, timeout=timeout)
        try:
            data = read_all(res, timeout)
        finally:
            res.close()
        if answer_headers is not None:
            answer_headers.update({k.lower(): v for k, v in res.headers.items()})
        if res.status >= 400:
            raise api_error_from(res.status, res.headers, data)
        if res.status == 204 or not data:
            return res.status, None
        try:
            return res.status, json.loads(data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise InvalidResponseError(res.status, "invalid_response", f"{res.op} answered {res.status} with a body that is not JSON",
                                       request_id=res.headers.get("X-Request-Id"), body=data) from None


def read_all(res: Response, timeout: Optional[float]) -> bytes:
    try:
        return res.raw.read()
    except Exception as e:
        raise _failure(res.op, timeout, e) from e


def _failure(op: str, timeout: Optional[float], e: Exception) -> Exception:
    """The client's error for a transport failure: a timeout, or a network error."""
    if isinstance(e, (TimeoutError, NetworkError)):
        return e
    if isinstance(e, socket.timeout) or (isinstance(e, OSError) and "timed out" in str(e)):
        return TimeoutError(op, timeout)
    return NetworkError(op, e)
