"""A lease's input files: fetched on demand with the lease's token, hashed, checked, deleted at the end."""
from __future__ import annotations

import asyncio
import hashlib
import http.client
import os
import re
import shutil
import tempfile
import threading
from typing import Dict, Optional, Union
from urllib.parse import urlsplit

from .errors import InputFileError
from .http_retry import TRANSIENT_STATUS, Aborted, Failure, read_error, retry_after, with_retries
from .protocol import InputFileRef
from .types import InputFile, InputFileOptions

#: Extensions by content type, so programs that go by the name (ffmpeg, Blender) see the right one.
EXTENSIONS = {
    "image/png": ".png", "image/jpeg": ".jpg", "image/webp": ".webp", "image/gif": ".gif",
    "model/gltf-binary": ".glb", "model/gltf+json": ".gltf", "model/obj": ".obj",
    "audio/wav": ".wav", "audio/x-wav": ".wav", "audio/wave": ".wav", "audio/mpeg": ".mp3",
    "audio/ogg": ".ogg", "audio/flac": ".flac", "video/mp4": ".mp4", "video/webm": ".webm",
    "video/x-msvideo": ".avi",
}
_BLOCK = 256 * 1024


def fetch_input_file(field: str, ref: InputFileRef, token: str, target: str, opts: InputFileOptions, aborted: threading.Event) -> InputFile:
    """GETs one file into ``target`` with retries, checking size and sha256. Blocking."""

    def attempt() -> Union[InputFile, Failure]:
        parts = urlsplit(ref.url)
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = cls(parts.netloc, timeout=opts.stall_timeout)
        try:
            path = parts.path + ("?" + parts.query if parts.query else "")
            conn.request("GET", path, headers={"authorization": f"Bearer {token}"})
            res = conn.getresponse()
            if res.status >= 300:
                code, message = read_error(res.status, res.read(4096))
                transient = res.status in TRANSIENT_STATUS
                err = InputFileError(
                    f"fetching input file {field} failed ({res.status} {code}): {message}",
                    "input_fetch_failed" if transient else "input_unavailable", transient, res.status,
                )
                return Failure(err, transient, outage=res.status == 503 and code == "unavailable", wait=retry_after(res.getheader("retry-after"), 10.0))
            digest = hashlib.sha256()
            size = 0
            with open(target, "wb") as out:
                os.chmod(target, 0o600)
                while True:
                    if aborted.is_set():
                        raise Aborted("the lease ended")
                    block = res.read(_BLOCK)
                    if not block:
                        break
                    size += len(block)
                    if size > ref.size:
                        raise InputFileError(f"input file {field} is larger than the {ref.size} bytes its lease gives", "bad_input", False)
                    digest.update(block)
                    out.write(block)
            if size != ref.size:
                raise InputFileError(f"input file {field} has {size} bytes, not the {ref.size} its lease gives", "bad_input", False)
            sha = digest.hexdigest()
            if sha != ref.sha256:
                raise InputFileError(f"input file {field} has sha256 {sha}, not the {ref.sha256} its lease gives", "bad_input", False)
            return InputFile(target, size, ref.content_type, sha)
        except (Aborted, InputFileError):
            raise
        except (OSError, http.client.HTTPException) as e:
            if aborted.is_set():
                raise Aborted("the lease ended") from e
            return Failure(InputFileError(f"fetching input file {field} failed: {e!r}", "input_fetch_failed", True), True)
        finally:
            conn.close()

    try:
        return with_retries(attempt, opts.retries, opts.retry_delay, opts.outage, aborted)
    except BaseException:
        try:
            os.unlink(target)
        except OSError:
            pass
        raise


class LeaseInputFiles:
    """The input files of one lease; each fetched once, on first demand. Lives on the event loop."""

    def __init__(self, files: Dict[str, InputFileRef], token: str, opts: Optional[InputFileOptions]) -> None:
        self._files = files
        self._token = token
        self._opts = opts or InputFileOptions()
        self._fetched: Dict[str, "asyncio.Task[InputFile]"] = {}
        self.ended = threading.Event()
        self._dir: Optional[str] = None
        self._count = 0

    @property
    def dir(self) -> str:
        """The lease's own temporary folder (made on first use, deleted when the lease ends)."""
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="switchyard-input-", dir=self._opts.tmp_dir)
        return self._dir

    def get(self, field: str) -> "asyncio.Task[InputFile]":
        task = self._fetched.get(field)
        if task is None:
            task = asyncio.ensure_future(self._fetch(field))
            # Errors reach whoever awaits; a handler that never does must not log a warning.
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
            self._fetched[field] = task
        return task

    async def _fetch(self, field: str) -> InputFile:
        if self.ended.is_set():
            raise Aborted("the lease ended")
        ref = self._files.get(field)
        if ref is None:
            held = ", ".join(self._files)
            raise InputFileError(f"the lease has no file for input field {field!r}" + (f" (it has {held})" if held else ""), "bad_input", False)
        ext = EXTENSIONS.get(ref.content_type.split(";")[0].strip().lower(), "")
        name = f"{self._count}-{re.sub(r'[^A-Za-z0-9_-]', '_', field)[:64]}{ext}"
        self._count += 1
        target = os.path.join(self.dir, name)
        return await asyncio.get_running_loop().run_in_executor(None, fetch_input_file, field, ref, self._token, target, self._opts, self.ended)

    async def dispose(self) -> None:
        """Stops fetches still running and deletes the lease's folder. Never raises."""
        self.ended.set()
        if self._fetched:
            await asyncio.gather(*self._fetched.values(), return_exceptions=True)
        if self._dir is not None:
            await asyncio.get_running_loop().run_in_executor(None, shutil.rmtree, self._dir, True)
