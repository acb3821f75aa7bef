"""Switchyard: a client of the job gateway's HTTP API (standard library only).

    from switchyard import Client
    client = Client("http://127.0.0.1:8080", "sy_...")
    job = client.wait(client.submit("inference:image:generate", {"prompt": "a lighthouse"}).run_id)
"""
from .client import DEFAULT_POLL_INTERVAL, DEFAULT_TIMEOUT, Client, JobIterator
from .errors import (
    SwitchyardError, APIError, InvalidRequestError, UnknownKindError, UnknownModelError,
    InvalidSchemaError, InvalidURLError, URLBlockedError, UnknownToolError, UnauthorizedError,
    InsufficientCreditsError, BudgetExceededError, ForbiddenError, NotFoundError, ModelNotFoundError,
    MethodNotAllowedError, ConflictError, NameConflictError, IdempotencyConflictError,
    AlreadyTerminalError, QuotaExceededError, PayloadTooLargeError, UnsupportedMediaTypeError,
    RangeNotSatisfiableError, MaxStepsError, RateLimitedError, HeadersTooLargeError, InternalError,
    UnavailableError, InvalidResponseError, NetworkError, TimeoutError, StreamError, ERROR_CLASSES,
    error_class_for,
)
from .error_codes import RUN_ERROR_CODES
from .batches import Batch, BatchSubmitted
from .events import EventStream
from .files import Files
from .types import (Capabilities, Capacity, Event, File, FilePage, FileQuota, Job, JobError, JobOutput, JobPage, KindCapability,
                    OutputFile, TERMINAL_STATUSES)

__version__ = "0.1.0"

__all__ = [
    "Client", "JobIterator", "EventStream", "Files", "DEFAULT_TIMEOUT", "DEFAULT_POLL_INTERVAL",
    "Job", "JobOutput", "OutputFile", "JobError", "JobPage", "Event", "File", "FilePage", "FileQuota",
    "Capabilities", "KindCapability", "Capacity", "TERMINAL_STATUSES", "__version__", "Batch", "BatchSubmitted", "RUN_ERROR_CODES",
]
__all__ += [
    "SwitchyardError", "APIError", "InvalidRequestError", "UnknownKindError", "UnknownModelError",
    "InvalidSchemaError", "InvalidURLError", "URLBlockedError", "UnknownToolError",
    "UnauthorizedError", "InsufficientCreditsError", "BudgetExceededError", "ForbiddenError", "NotFoundError",
    "ModelNotFoundError", "MethodNotAllowedError", "ConflictError", "NameConflictError",
    "IdempotencyConflictError", "AlreadyTerminalError", "QuotaExceededError",
    "PayloadTooLargeError", "UnsupportedMediaTypeError", "RangeNotSatisfiableError", "MaxStepsError",
    "RateLimitedError", "HeadersTooLargeError", "InternalError", "UnavailableError", "InvalidResponseError",
    "NetworkError", "TimeoutError", "StreamError", "ERROR_CLASSES", "error_class_for",
]
