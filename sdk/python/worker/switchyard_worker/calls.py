"""Calling user code that may be sync or async: handlers, and the backend probe."""
from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any, Callable, Optional


def in_daemon_thread(fn: Callable[..., Any], arg: Any, name: str) -> "asyncio.Future[Any]":
    """Runs ``fn(*arg)`` in a daemon thread of its own; the future settles on the running loop.

    Not a ThreadPoolExecutor: its threads are joined when the interpreter exits, so a handler
    (or probe) that never returns would keep a stopped worker's process alive.
    """
    loop = asyncio.get_running_loop()
    future: "asyncio.Future[Any]" = loop.create_future()

    def settle(value: Any, error: Optional[BaseException]) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def target() -> None:
        try:
            value, error = fn(*arg), None
        except BaseException as e:  # the user's code: anything may come out of it
            value, error = None, e
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:
            pass  # the loop is closed: the worker is gone

    threading.Thread(target=target, name=name, daemon=True).start()
    return future


def is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))
