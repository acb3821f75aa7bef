"""Errors of the client. Everything it raises is a :class:`SwitchyardError`.

A gateway's error answer ``{"error": {"code", "message", "details"?}}`` becomes an
:class:`APIError` of the code's own class (``NotFoundError``, ``InsufficientCreditsError``...),
chosen from one table, :data:`ERROR_CLASSES`, that holds every code of docs/api.md. A code a
newer gateway adds gets the plain ``APIError`` (read ``.code``).
"""
from __future__ import annotations

import builtins
import json
from typing import Any, Dict, Mapping, Optional, Type

__all__ = [
    "SwitchyardError",
    "APIError",
    "InvalidRequestError",
    "UnknownKindError",
    "UnknownModelError",
    "InvalidSchemaError",
    "InvalidURLError",
    "URLBlockedError",
    "UnknownToolError",
    "UnauthorizedError",
    "InsufficientCreditsError",
    "ForbiddenError",
    "NotFoundError",
    "ModelNotFoundError",
    "MethodNotAllowedError",
    "ConflictError",
    "NameConflictError",
    "IdempotencyConflictError",
    "AlreadyTerminalError",
    "QuotaExceededError",
    "PayloadTooLargeError",
    "UnsupportedMediaTypeError",
    "RangeNotSatisfiableError",
    "MaxStepsError",
    "RateLimitedError",
    "HeadersTooLargeError",
    "InternalError",
    "UnavailableError",
    "InvalidResponseError",
    "NetworkError",
    "TimeoutError",
    "StreamError",
    "ERROR_CLASSES",
    "error_class_for",
]


class SwitchyardError(Exception):
    """The base of every error of the client.

    ``status``, ``code``, ``message``, ``details``, ``request_id`` and ``body`` describe the
    gateway's answer when there was one (an :class:`APIError`); they are None (``details`` {})
    for errors without an answer: a network failure, a timeout, a stream that gave up.
    """

    status: Optional[int] = None
    code: Optional[str] = None
    details: Dict[str, Any]
    request_id: Optional[str] = None
    body: Optional[bytes] = None
    retry_after: Optional[float] = None

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.details = {}

    def __str__(self) -> str:
        return self.message


class APIError(SwitchyardError):
    """An error answer of the gateway, with its envelope.

    ``status`` (HTTP), ``code`` (stable, for programs), ``message`` (for people), ``details``
    (the envelope's details, {} when absent), ``request_id`` (the answer's X-Request-Id),
    ``retry_after`` (seconds of Retry-After, or None), ``body`` (the answer's bytes) and
    ``json`` (the body parsed, or None).
    """

    def __init__(self, status: int, code: str, message: str, *, details: Optional[Mapping[str, Any]] = None,
                 request_id: Optional[str] = None, retry_after: Optional[float] = None, body: bytes = b"") -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.details = dict(details or {})
        self.request_id = request_id
        self.retry_after = retry_after
        self.body = body

    @property
    def json(self) -> Any:
        try:
            return json.loads(self.body or b"")
        except ValueError:
            return None

    @property
    def retryable(self) -> bool:
        """True for 5xx and 429: the same request may work later (see ``retry_after``)."""
        return self.status is not None and (self.status >= 500 or self.status == 429)

    def __str__(self) -> str:
        s = f"{self.status} {self.code}: {self.message}"
        if self.request_id:
            s += f" (request {self.request_id})"
        return s

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status!r}, code={self.code!r}, message={self.message!r}, request_id={self.request_id!r})"


# One class per error code of the gateway (models/errors.ts; docs/api.md, "Errors").
class InvalidRequestError(APIError):
    """``invalid_request``: the body, query or a header is invalid (400); schema failures in details['errors']"""


class UnknownKindError(APIError):
    """``unknown_kind``: the kind is not in the catalogue (400); details['kinds']"""


class UnknownModelError(APIError):
    """``unknown_model``: input.model names no model of the kind (400)"""


class InvalidSchemaError(APIError):
    """``invalid_schema``: a schema does not compile (400)"""


class InvalidURLError(APIError):
    """``invalid_url``: an outbound URL is not acceptable (400)"""


class URLBlockedError(APIError):
    """``url_blocked``: an outbound URL resolves to a non-public address (400)"""


class UnknownToolError(APIError):
    """``unknown_tool``: a bot names a tool the account does not have (400)"""


class UnauthorizedError(APIError):
    """``unauthorized``: the key is missing, unknown or revoked (401)"""


class InsufficientCreditsError(APIError):
    """``insufficient_credits``: the balance is short of the price (402); details['needed'], details['available']"""


class BudgetExceededError(APIError):
    """``budget_exceeded``: the account's monthly budget would be passed (402); details['budget'], ['spent'], ['reserved'], ['period'], ['needed']"""


class ForbiddenError(APIError):
    """``forbidden``: not allowed from this origin (403)"""


class NotFoundError(APIError):
    """``not_found``: no such resource, or another account's (404)"""


class ModelNotFoundError(APIError):
    """``model_not_found``: the OpenAI surface's unknown model (404)"""


class MethodNotAllowedError(APIError):
    """``method_not_allowed``: the method is not served on this path (405)"""


class ConflictError(APIError):
    """``conflict``: the state forbids the change; retry (409)"""


class NameConflictError(APIError):
    """``name_conflict``: the account already has a tool of that name (409)"""


class IdempotencyConflictError(APIError):
    """``idempotency_conflict``: the Idempotency-Key was used with another body (409); details['run_id']"""


class AlreadyTerminalError(APIError):
    """``already_terminal``: the run has already ended (409); details['status']"""


class QuotaExceededError(APIError):
    """``quota_exceeded``: the account's files would pass the quota (409)"""


class PayloadTooLargeError(APIError):
    """``payload_too_large``: the body is too large (413)"""


class UnsupportedMediaTypeError(APIError):
    """``unsupported_media_type``: the body's type is not accepted (415)"""


class RangeNotSatisfiableError(APIError):
    """``range_not_satisfiable``: a Range starts past the end of the bytes (416); details['size']"""


class MaxStepsError(APIError):
    """``max_steps``: a bot's agent loop ran out of steps (422)"""


class RateLimitedError(APIError):
    """``rate_limited``: a rate limit was hit (429); see retry_after"""


class HeadersTooLargeError(APIError):
    """``headers_too_large``: the request line and headers are too large (431)"""


class InternalError(APIError):
    """``internal``: an unexpected failure of the gateway (500)"""


class UnavailableError(APIError):
    """``unavailable``: a backing service is down or the gateway is shutting down (503)"""


class InvalidResponseError(APIError):
    """``invalid_response``: an answer that is not the contract's JSON (a proxy's HTML error page keeps its status)"""


#: The one map from an error code to its class; a test checks it against models/errors.ts.
ERROR_CLASSES: Dict[str, Type[APIError]] = {
    "invalid_request": InvalidRequestError,
    "unknown_kind": UnknownKindError,
    "unknown_model": UnknownModelError,
    "invalid_schema": InvalidSchemaError,
    "invalid_url": InvalidURLError,
    "url_blocked": URLBlockedError,
    "unknown_tool": UnknownToolError,
    "unauthorized": UnauthorizedError,
    "insufficient_credits": InsufficientCreditsError,
    "budget_exceeded": BudgetExceededError,
    "forbidden": ForbiddenError,
    "not_found": NotFoundError,
    "model_not_found": ModelNotFoundError,
    "method_not_allowed": MethodNotAllowedError,
    "conflict": ConflictError,
    "name_conflict": NameConflictError,
    "idempotency_conflict": IdempotencyConflictError,
    "already_terminal": AlreadyTerminalError,
    "quota_exceeded": QuotaExceededError,
    "payload_too_large": PayloadTooLargeError,
    "unsupported_media_type": UnsupportedMediaTypeError,
    "range_not_satisfiable": RangeNotSatisfiableError,
    "max_steps": MaxStepsError,
    "rate_limited": RateLimitedError,
    "headers_too_large": HeadersTooLargeError,
    "internal": InternalError,
    "unavailable": UnavailableError,
    "invalid_response": InvalidResponseError,
}


def error_class_for(code: str) -> Type[APIError]:
    """The class of an error code; plain :class:`APIError` for a code this client does not know."""
    return ERROR_CLASSES.get(code, APIError)


def api_error_from(status: int, headers: Mapping[str, str], body: bytes) -> APIError:
    """Reads an error answer: its envelope when it has one, else ``invalid_response``."""
    request_id = headers.get("X-Request-Id") or None
    retry_after: Optional[float] = None
    ra = (headers.get("Retry-After") or "").strip()
    if ra.isdigit():
        retry_after = float(ra)
    try:
        parsed = json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        parsed = None
    err = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(err, dict) and isinstance(err.get("code"), str):
        code: str = err["code"]
        message = err.get("message") if isinstance(err.get("message"), str) else code
        details = err.get("details") if isinstance(err.get("details"), dict) else None
        return error_class_for(code)(status, code, message, details=details, request_id=request_id, retry_after=retry_after, body=body)
    return InvalidResponseError(status, "invalid_response", f"HTTP {status} without a Switchyard error body",
                                request_id=request_id, retry_after=retry_after, body=body)


class NetworkError(SwitchyardError):
    """No complete answer: DNS, a refused or reset connection, a body cut short. ``op`` names
    the request (``GET /v1/jobs/run_...``); the transport's exception is ``__cause__``."""

    def __init__(self, op: str, cause: BaseException) -> None:
        super().__init__(f"{op} failed: {cause}")
        self.op = op


class TimeoutError(SwitchyardError, builtins.TimeoutError):
    """A request got no answer within its timeout, or :meth:`Client.wait` ran past its own.

    Also a built-in ``TimeoutError``. ``op`` is the request (or ``wait <run id>``),
    ``timeout`` the limit in seconds; after a wait, ``run_id`` is the run (which keeps
    running) and ``last_job`` the last state seen of it, or None.
    """

    def __init__(self, op: str, timeout: Optional[float], *, run_id: Optional[str] = None, last_job: Any = None) -> None:
        if run_id:
            last = getattr(last_job, "status", None) or "unknown"
            msg = f"{run_id} was not terminal after {timeout}s (last status: {last}); it keeps running"
        else:
            msg = f"{op} got no complete answer within {timeout}s"
        SwitchyardError.__init__(self, msg)
        self.op = op
        self.timeout = timeout
        self.run_id = run_id
        self.last_job = last_job


class StreamError(SwitchyardError):
    """An event stream that kept failing after its reconnects. Resume it by passing
    ``last_event_id`` to :meth:`Client.stream`; the last failure is ``__cause__``."""

    def __init__(self, run_id: str, last_event_id: Optional[int], attempts: int, cause: BaseException) -> None:
        last = "unset" if last_event_id is None else str(last_event_id)
        super().__init__(f"the event stream of {run_id} failed {attempts} times in a row ({cause}); resume after event {last}")
        self.run_id = run_id
        self.last_event_id = last_event_id
        self.attempts = attempts
