"""The worker's options checked and completed with their defaults (as sdk/worker/worker-options.ts
does for the TypeScript SDK): a mistake surfaces in the constructor, not as a refusal at the
first connect."""
from __future__ import annotations

import os
import platform
import secrets
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import __version__
from .protocol import PROTOCOL_VERSIONS, TIERS, WORKER_IDENTITY_PATTERN, worker_socket_url


def check_connection(gateway: Optional[str], token: Optional[str], tier: str, slots: int, protocols: Sequence[int]) -> Tuple[str, str]:
    """The socket URL and token (from the arguments or the environment), once the basics check out."""
    gateway = gateway or os.environ.get("SWITCHYARD_GATEWAY")
    token = token or os.environ.get("SWITCHYARD_WORKER_TOKEN")
    if not gateway:
        raise ValueError("the gateway URL is required (gateway=... or SWITCHYARD_GATEWAY)")
    if not token or not token.strip():
        raise ValueError("a worker token is required (token=... or SWITCHYARD_WORKER_TOKEN)")
    if tier not in TIERS:
        raise ValueError(f"tier must be open, trusted or private, not {tier!r}")
    if tier == "private":
        raise ValueError("private workers need attestation, which the Python SDK does not do yet (use the TypeScript SDK)")
    if not isinstance(slots, int) or isinstance(slots, bool) or not 1 <= slots <= 64:
        raise ValueError("slots must be a whole number from 1 to 64")
    if not protocols or any(p not in PROTOCOL_VERSIONS for p in protocols):
        raise ValueError(f"protocols must be a non-empty subset of {PROTOCOL_VERSIONS}")
    return worker_socket_url(gateway), token


def check_identity(identity: Optional[str]) -> str:
    """The worker's identity (protocol 5): the one given, or a random one for this Worker."""
    if identity is None:
        return f"sdk-{secrets.token_hex(12)}"
    if not isinstance(identity, str) or not WORKER_IDENTITY_PATTERN.match(identity):
        raise ValueError(f"identity must be 1-128 letters, digits and ._:- starting with a letter or digit, not {identity!r}")
    return identity


def check_probe(probe: Optional[Callable[..., Any]]) -> None:
    if probe is not None and not callable(probe):
        raise TypeError("probe must be a function (sync or async) that returns when the backend answers")


def machine_info(hardware: Optional[Dict[str, Any]], software: Optional[Dict[str, Any]]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """What ``register`` says about the worker: the SDK's own findings, with the caller's over them."""
    found: Dict[str, Any] = {"platform": sys.platform, "arch": platform.machine(), "cpus": os.cpu_count() or 1}
    try:
        found["memory_gb"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)
    except (ValueError, OSError, AttributeError):
        pass
    hw = {**found, **(hardware or {})}
    sw = {"sdk": "switchyard-worker-python", "sdk_version": __version__, "python": platform.python_version(), **(software or {})}
    for name, info in (("hardware", hw), ("software", sw)):
        if len(info) > 32:
            raise ValueError(f"{name} may have at most 32 keys")
    return hw, sw


def resolve_kinds(kinds: Union[Sequence[str], str, None], handlers: Dict[str, Callable[..., Any]]) -> List[str]:
    """The kinds served: those given (or ``"all"``), else those with a handler; each needs one (or a ``"*"``)."""
    if kinds is None:
        kinds = [k for k in handlers if k != "*"]
        if not kinds:
            raise ValueError("no kinds: register handlers (worker.handler(kind)) or pass kinds=[...] with a '*' handler")
    elif kinds == "all":
        kinds = ["all"]
    if isinstance(kinds, str) or not 1 <= len(kinds) <= 64:
        raise ValueError("kinds must be 'all' or a list of 1 to 64 kind names")
    resolved = list(dict.fromkeys(kinds))
    missing = [k for k in resolved if k != "all" and k not in handlers and "*" not in handlers]
    if "all" in resolved and "*" not in handlers:
        missing.append("all")
    if missing:
        raise ValueError(f"no handler for {', '.join(missing)} (register one per kind, or a '*' fallback)")
    return resolved
