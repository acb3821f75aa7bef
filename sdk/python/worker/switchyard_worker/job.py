"""The object a handler receives: its input, and the lease's progress, log, output and files."""
from __future__ import annotations

import asyncio
import os
import threading
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, Optional, Union

from .errors import JobCancelled
from .input_files import LeaseInputFiles
from .protocol import LeaseInfo
from .types import InputFile

if TYPE_CHECKING:  # pragma: no cover
    from .lease import LeaseRunner
    from .lease_state import LeaseState
    from .rank_stream import JobRank


class Job:
    """One job as a handler sees it.

    Its methods may be called from the handler's thread (sync handlers) or from the event loop
    (async handlers) alike.
    """

    def __init__(self, runner: "LeaseRunner", lease: "LeaseState", files: LeaseInputFiles, loop: asyncio.AbstractEventLoop) -> None:
        self._runner = runner
        self._lease = lease
        self._files = files
        self._loop = loop
        self._loop_thread = threading.get_ident()
        info: LeaseInfo = lease.info
        #: The job's input, as the caller submitted it (input files replaced by the gateway's staging).
        self.input: Dict[str, Any] = info.input
        self.kind: str = info.kind
        self.run_id: str = info.run_id
        self.lease_id: str = info.lease_id
        #: 1 for the first attempt; more when the run was retried.
        self.attempt: int = info.attempt
        self.tier: str = info.tier
        #: Set when the job is cancelled (or the worker stops, or the lease is lost): sync handlers poll it.
        self.cancel_event: threading.Event = lease.cancel_event
        #: Protocol 6: the pipeline stage this lease is and its frames (rank_stream.py); None for a whole job.
        self.rank: Optional["JobRank"] = lease.rank

    # -- cancellation ------------------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        """True once the caller cancelled the job, the worker is stopping or the lease was lost."""
        return self.cancel_event.is_set()

    def raise_if_cancelled(self) -> None:
        """Raises JobCancelled once ``cancelled`` is true (for loops in sync handlers)."""
        if self.cancel_event.is_set():
            raise JobCancelled(self._lease.cause)

    # -- reports -------------------------------------------------------------------------------

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        if threading.get_ident() == self._loop_thread:
            fn(*args)
        else:
            try:
                self._loop.call_soon_threadsafe(fn, *args)
            except RuntimeError:
                pass  # the worker has stopped: nothing is reported any more

    def progress(self, fraction: float, message: Optional[str] = None) -> None:
        """Fraction done in [0, 1]; sent at most every ``progress_interval``, the latest value always."""
        self._call(self._runner.progress, self._lease, fraction, message)

    def log(self, line: str) -> None:
        """A log line of the run (callers see it in its events)."""
        self._call(self._runner.log_line, self._lease, str(line))

    def output(self, delta: str) -> None:
        """Streamed text (LLM tokens): the concatenation of the deltas is the reply."""
        self._call(self._runner.output, self._lease, str(delta))

    # -- files ---------------------------------------------------------------------------------

    def input_file(self, field: str) -> Union[InputFile, Awaitable[InputFile]]:
        """The file of input field ``field``, fetched once and checked against its sha256.

        In an async handler ``await job.input_file("image")``; in a sync handler
        ``job.input_file("image")`` returns the file. Raises InputFileError (its code and
        retryable flag fail the job if you let it through).
        """
        if threading.get_ident() == self._loop_thread:
            return asyncio.shield(self._files.get(field))
        future = asyncio.run_coroutine_threadsafe(self._get_file(field), self._loop)
        return future.result()

    async def _get_file(self, field: str) -> InputFile:
        return await asyncio.shield(self._files.get(field))

    @property
    def tmpdir(self) -> str:
        """A folder of this lease's own, deleted when the lease ends (after the uploads)."""
        return self._files.dir

    def path(self, name: str) -> str:
        """A path named ``name`` in ``tmpdir``: write an artifact there and return the path."""
        if os.path.basename(name) != name or name in ("", ".", ".."):
            raise ValueError(f"{name!r} is not a plain file name")
        return os.path.join(self._files.dir, name)
