"""Artifact uploads: ``POST {upload_url}?name=...`` with the lease's token, streamed, hash-checked.

Blocking code (http.client): the worker runs it in a thread.
"""
from __future__ import annotations

import hashlib
import http.client
import json
import os
import threading
from typing import Any, BinaryIO, Optional, Union
from urllib.parse import urlencode, urlsplit

from .errors import UploadError
from .http_retry import TRANSIENT_STATUS, Aborted, Failure, read_error, retry_after, with_retries
from .types import Artifact, UploadedArtifact, UploadOptions

_BLOCK = 256 * 1024


class _HashingReader:
    """A file http.client reads block by block: hashed on the way, stopped when the lease ends."""

    def __init__(self, f: BinaryIO, aborted: Optional[threading.Event]) -> None:
        self._f = f
        self._aborted = aborted
        self.hash = hashlib.sha256()
        self.size = 0

    def read(self, n: int = _BLOCK) -> bytes:
        if self._aborted is not None and self._aborted.is_set():
            raise Aborted("the lease ended")
        block = self._f.read(n if n and n > 0 else _BLOCK)
        self.hash.update(block)
        self.size += len(block)
        return block


def _connection(url: str, timeout: float) -> http.client.HTTPConnection:
    parts = urlsplit(url)
    if parts.scheme == "https":
        return http.client.HTTPSConnection(parts.netloc, timeout=timeout)
    if parts.scheme == "http":
        return http.client.HTTPConnection(parts.netloc, timeout=timeout)
    raise UploadError(f"the upload URL {url!r} is not http(s)", 0, "bad_url", False)


def _is_uploaded(body: Any) -> bool:
    return (
        isinstance(body, dict)
        and isinstance(body.get("url"), str)
        and body["url"].startswith(("http://", "https://"))
        and isinstance(body.get("sha256"), str)
        and isinstance(body.get("size"), int)
        and isinstance(body.get("content_type"), str)
    )


def upload_artifact(
    upload_url: str,
    token: str,
    artifact: Artifact,
    options: Optional[UploadOptions] = None,
    aborted: Optional[threading.Event] = None,
) -> UploadedArtifact:
    """Uploads one artifact of a lease; retries network errors and transient answers.

    The gateway's answer is checked against the bytes sent (size and sha256). Raises
    UploadError when it cannot be done, Aborted when ``aborted`` is set meanwhile.
    """
    opts = options or UploadOptions()
    parts = urlsplit(upload_url)
    query = (parts.query + "&" if parts.query else "") + urlencode({"name": artifact.name})
    target = parts.path + "?" + query
    name = artifact.name
    headers = {"authorization": f"Bearer {token}", "content-type": artifact.content_type or "application/octet-stream"}

    def attempt() -> Union[UploadedArtifact, Failure]:
        conn = _connection(upload_url, opts.timeout)
        f: Optional[BinaryIO] = None
        try:
            body: Union[bytes, _HashingReader]
            if artifact.data is not None:
                data = bytes(artifact.data)
                body, size, digest = data, len(data), hashlib.sha256(data).hexdigest()
            else:
                path = os.fspath(artifact.path)  # type: ignore[arg-type]
                f = open(path, "rb")
                size = os.fstat(f.fileno()).st_size
                body, digest = _HashingReader(f, aborted), ""
            conn.request("POST", target, body=body, headers={**headers, "content-length": str(size)})
            res = conn.getresponse()
            raw = res.read()
            if isinstance(body, _HashingReader):
                size, digest = body.size, body.hash.hexdigest()
            if res.status >= 300:
                code, message = read_error(res.status, raw)
                err = UploadError(f"upload of {name} refused ({res.status} {code}): {message}", res.status, code, res.status in TRANSIENT_STATUS)
                return Failure(err, err.retryable, outage=res.status == 503 and code == "unavailable", wait=retry_after(res.getheader("retry-after"), 10.0))
            try:
                answer = json.loads(raw)
            except ValueError:
                answer = None
            if not _is_uploaded(answer):
                return Failure(UploadError(f"the gateway's answer to the upload of {name} is not {{url, sha256, size, content_type}}", res.status, "bad_answer", False), False)
            if answer["size"] != size or answer["sha256"] != digest:
                err = UploadError(f"the gateway stored {answer['size']} bytes (sha256 {answer['sha256']}) for {name}, not the {size} sent ({digest})", res.status, "corrupted", True)
                return Failure(err, True)
            return UploadedArtifact(answer["url"], answer["sha256"], answer["size"], answer["content_type"], answer.get("expires_at"))
        except (Aborted, UploadError):
            raise
        except FileNotFoundError as e:
            raise UploadError(f"artifact {name}: {e}", 0, "no_file", False) from e
        except (OSError, http.client.HTTPException) as e:
            if aborted is not None and aborted.is_set():
                raise Aborted("the lease ended") from e
            return Failure(UploadError(f"upload of {name} failed: {e!r}", 0, "network_error", True), True)
        finally:
            if f is not None:
                f.close()
            conn.close()

    return with_retries(attempt, opts.retries, opts.retry_delay, opts.outage, aborted)
