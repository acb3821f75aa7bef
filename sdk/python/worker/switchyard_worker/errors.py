"""The errors a handler raises, and the ones the SDK raises to it."""
from __future__ import annotations

from typing import Optional


class WorkerError(Exception):
    """Raise it from a handler to fail the job with your own ``code`` and ``retryable`` flag.

    ``retryable=True`` sends the run back to its queue while attempts remain (a GPU out of
    memory, a model server that is down); ``False`` fails the job for good (a prompt your
    model refuses). Any other exception fails the job as ``engine_error``, retryable.
    """

    def __init__(self, message: str, code: str = "engine_error", retryable: bool = True) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = retryable
        self.message = message


class InputFileError(WorkerError):
    """An input file that could not be had (``job.input_file``).

    ``bad_input`` (not retryable): the lease names no such file, or the bytes are not the ones it
    describes; ``input_unavailable`` (not retryable): the gateway refused (401, 403, 404...);
    ``input_fetch_failed`` (retryable): the network or the gateway failed on every try.
    """

    def __init__(self, message: str, code: str, retryable: bool, status: int = 0) -> None:
        super().__init__(message, code, retryable)
        self.status = status


class UploadError(WorkerError):
    """An artifact upload that did not succeed; the job fails as ``upload_failed``.

    ``status`` is the HTTP status (0 when none came), ``reason`` the gateway's error code.
    """

    def __init__(self, message: str, status: int, reason: str, retryable: bool) -> None:
        super().__init__(message, "upload_failed", retryable)
        self.status = status
        self.reason = reason


class WorkerRefusedError(Exception):
    """The gateway will not take this worker (bad token, tier not allowed, bad register)."""

    def __init__(self, message: str, code: str, status: int) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


class JobCancelled(Exception):
    """Raised by ``job.raise_if_cancelled()`` in a sync handler once the job is cancelled."""

    def __init__(self, reason: Optional[str] = None) -> None:
        super().__init__(reason or "the job was cancelled")
