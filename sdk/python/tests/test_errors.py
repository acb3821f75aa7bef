"""Errors: every code of the gateway (models/errors.ts) maps to its own class with the
envelope, answers that are not the contract, and the codes the real gateway gives on the
client's own routes."""
from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, Type

import pytest

from conftest import MISSING_RUN, Gateway, answer, png_of
from switchyard import (ERROR_CLASSES, APIError, Client, IdempotencyConflictError, InsufficientCreditsError,
                        InvalidRequestError, InvalidResponseError, InvalidURLError, NotFoundError, PayloadTooLargeError,
                        QuotaExceededError, SwitchyardError, UnauthorizedError, UnknownKindError, UnknownModelError,
                        UnsupportedMediaTypeError, URLBlockedError, error_class_for)

ERRORS_TS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "models", "errors.ts")


def gateway_codes() -> Dict[str, int]:
    """The gateway's one map of codes to statuses (ERROR_STATUS in models/errors.ts), read
    from this checkout so that a code added there and forgotten here fails."""
    if not os.path.exists(ERRORS_TS):
        pytest.skip("models/errors.ts is not beside this package: the client is outside its repository")
    with open(ERRORS_TS, encoding="utf-8") as f:
        src = f.read()
    block = re.search(r"export const ERROR_STATUS = \{(.*?)\} as const", src, re.S)
    assert block, "ERROR_STATUS not found in models/errors.ts"
    codes = {m[0]: int(m[1]) for m in re.findall(r"^\s*([a-z_]+):\s*(\d{3}),", block.group(1), re.M)}
    assert len(codes) >= 20, codes
    return codes


def test_every_gateway_code_is_mapped(scripted: Any) -> None:
    """Every code the gateway may send, as the gateway sends it: the envelope, X-Request-Id
    and, for some, Retry-After. Each becomes an APIError of its own class and no other's."""
    codes = gateway_codes()
    assert set(ERROR_CLASSES) - set(codes) == {"invalid_response"}, "the client maps codes the gateway does not have"
    current: Dict[str, Any] = {}

    def handle(h: Any) -> None:
        code, status = current["code"], current["status"]
        headers = {"X-Request-Id": f"req-{code}"}
        if status in (429, 503):
            headers["Retry-After"] = "3"
        answer(h, status, json.dumps({"error": {"code": code, "message": f"about {code}", "details": {"n": 1}}}).encode(), headers=headers)

    c = Client(scripted(handle).url, "k")
    classes = set()
    for code, status in codes.items():
        current.update(code=code, status=status)
        cls: Type[APIError] = error_class_for(code)
        assert cls is not APIError, f"{code} ({status}) has no class"
        classes.add(cls)
        with pytest.raises(cls) as e:
            c.get(MISSING_RUN)
        err = e.value
        assert type(err) is cls and isinstance(err, SwitchyardError)
        assert (err.status, err.code, err.message, err.request_id, err.details) == (status, code, f"about {code}", f"req-{code}", {"n": 1})
        assert err.retryable == (status == 429 or status >= 500), code
        assert err.retry_after == (3.0 if status in (429, 503) else None), code
        assert code in str(err) and f"req-{code}" in str(err)
        assert err.json["error"]["code"] == code and err.body
    assert len(classes) == len(codes), "one class per code"
    assert error_class_for("a_code_of_tomorrow") is APIError


def test_answers_that_are_not_the_contract(scripted: Any) -> None:
    """A proxy's HTML error page keeps its status, as invalid_response; so does a 200 that is not JSON."""
    state = {"status": 502}
    srv = scripted(lambda h: answer(h, state["status"], b"<h1>Bad gateway</h1>", "text/html"))
    c = Client(srv.url, "k")
    with pytest.raises(InvalidResponseError) as e:
        c.get(MISSING_RUN)
    assert e.value.status == 502 and e.value.code == "invalid_response" and e.value.body == b"<h1>Bad gateway</h1>" and e.value.retryable
    state["status"] = 200
    with pytest.raises(InvalidResponseError):
        c.get(MISSING_RUN)


def test_gateway_errors(gateway: Gateway, client: Client) -> None:
    """The codes a caller can meet on the client's own routes, from the real gateway."""
    image = "inference:image:generate"

    def check(cls: Type[APIError], status: int, fn: Any) -> APIError:
        with pytest.raises(cls) as e:
            fn()
        err = e.value
        assert err.status == status and err.request_id and err.message, repr(err)
        return err

    assert check(InvalidRequestError, 400, lambda: client.submit(image, {"prompt": 7})).details["errors"]
    assert check(UnknownKindError, 400, lambda: client.submit("inference:nope", {})).details["kinds"]
    check(UnknownModelError, 400, lambda: client.submit(image, {"prompt": "x", "model": "no-such-model"}))
    check(InvalidURLError, 400, lambda: client.submit(image, {"prompt": "x"}, webhook="http://hooks.example.com/x"))
    check(URLBlockedError, 400, lambda: client.submit(image, {"prompt": "x"}, webhook="https://127.0.0.1/x"))
    check(UnauthorizedError, 401, lambda: gateway.client("sy_not_a_real_key").get(MISSING_RUN))
    err = check(NotFoundError, 404, lambda: client.get(MISSING_RUN, headers={"X-Request-Id": "py-client-404"}))
    assert err.request_id == "py-client-404", "the gateway echoes the caller's request id"
    check(PayloadTooLargeError, 413, lambda: client.submit(image, {"prompt": "x", "padding": "x" * (4 << 20)}))
    err = check(UnsupportedMediaTypeError, 415, lambda: client.files.upload(png_of(2), content_type="audio/wav"))
    assert err.details["detected"] == "image/png"

    assert gateway.poor_key, "SWITCHYARD_TEST_POOR_KEY is set by test/python-client.test.ts"
    poor = gateway.client(gateway.poor_key)
    err = check(InsufficientCreditsError, 402, lambda: poor.submit("inference:video:generate", {"prompt": "costly"}))
    assert err.details["needed"] == 40
    assert 0 < gateway.file_max < gateway.quota, "the file limits are set below the quota"
    check(PayloadTooLargeError, 413, lambda: poor.files.upload(b"a" * (gateway.file_max + 1), content_type="text/plain", filename="big.txt"))
    kept, used = [], 0
    try:
        while used + gateway.file_max <= gateway.quota:
            kept.append(poor.files.upload(b"q" * gateway.file_max, content_type="text/plain", filename="fill.txt").id)
            used += gateway.file_max
        check(QuotaExceededError, 409, lambda: poor.files.upload(b"q" * gateway.file_max, content_type="text/plain", filename="fill.txt"))
    finally:
        for file_id in kept:
            poor.files.delete(file_id)


def test_idempotency_conflict_class_is_exported() -> None:
    assert ERROR_CLASSES["idempotency_conflict"] is IdempotencyConflictError
