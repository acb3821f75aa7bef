"""Whether the worker's backend answers (protocol 5, docs/worker-protocol.md "Backend down").

The backend is the inference server behind the handlers (ComfyUI, a Cog container, an
OpenAI-compatible server). A lease that failed with ``upstream_unavailable`` says it does not
answer: the gateway is told (``backend`` frame) and offers the worker no lease, instead of handing
it every retry of the job only to fail it in milliseconds, until ``probe`` succeeds (or, without
a probe, the wait is over) and the gateway is told again. Mirrors sdk/worker/backend-watch.ts.
"""
from __future__ import annotations

import asyncio
import inspect
import random
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional

from .calls import in_daemon_thread, is_async
from .protocol import BACKEND_STATE_PROTOCOL, MAX_BACKEND_MESSAGE, cut
from .types import BackendOptions

if TYPE_CHECKING:  # pragma: no cover
    from .worker import Worker

#: Returns (or resolves) when the backend answers; raises (or returns False) while it does not.
Probe = Callable[[], Any]


class BackendWatch:
    def __init__(self, worker: "Worker", probe: Optional[Probe], options: BackendOptions) -> None:
        self.worker = worker
        self.probe = probe
        self.options = options
        #: Set while the backend is down: the message the gateway was given, and the next wait.
        self.down: Optional[Dict[str, Any]] = None
        self._timer: Optional[asyncio.TimerHandle] = None
        self._probing: Optional["asyncio.Task[None]"] = None
        self._stopped = False
        #: Times the backend went down since a lease last succeeded: each makes the first wait longer.
        self._streak = 0

    @property
    def available(self) -> bool:
        return self.down is None

    def unavailable(self, message: str) -> None:
        """A lease failed with ``upstream_unavailable``: no more leases until the backend answers."""
        if self.down is not None or self._stopped:
            return
        # A backend that answers probes but fails leases is given longer and longer to settle.
        delay = min(self.options.first_delay * 2 ** self._streak, self.options.max_delay)
        self._streak += 1
        self.down = {"message": cut(message, MAX_BACKEND_MESSAGE), "delay": delay}
        self.worker.log.warning("the backend does not answer (%s): taking no leases until it does", self.down["message"])
        self._send({"type": "backend", "available": False, "message": self.down["message"]})
        self.worker.emit("backend", {"available": False, "message": self.down["message"]})
        self._schedule()

    def succeeded(self) -> None:
        """A lease succeeded: whatever a probe would say, the backend answers."""
        self._streak = 0
        if self.down is not None:
            self._recovered("a lease succeeded")

    def registered(self) -> None:
        """A new connection starts available: it is told the backend is down, if it is."""
        if self.down is not None:
            self._send({"type": "backend", "available": False, "message": self.down["message"]})

    def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        if self._probing is not None:
            self._probing.cancel()

    def _send(self, frame: Dict[str, Any]) -> None:
        # A gateway older than protocol 5 refuses the frame: it cannot be told.
        conn = self.worker.connection.current
        if conn is not None and conn.registered and not conn.closed and conn.protocol >= BACKEND_STATE_PROTOCOL:
            conn.send(frame)

    def _schedule(self) -> None:
        if self.down is None or self._stopped:
            return
        cap = self.down["delay"]
        # Jittered (half fixed, half random), so the workers of one failed backend do not probe it in step.
        self._timer = asyncio.get_running_loop().call_later(cap / 2 + random.random() * cap / 2, self._start_check)

    def _start_check(self) -> None:
        self._probing = asyncio.ensure_future(self._check())

    async def _check(self) -> None:
        down = self.down
        if down is None or self._stopped:
            return
        if self.probe is None:
            self._recovered("the wait is over (no probe to ask the backend)")
            return
        try:
            answer = await asyncio.wait_for(self._ask(self.probe), self.options.probe_timeout)
            if answer is False:
                raise RuntimeError("the probe returned False")
        except asyncio.CancelledError:
            raise  # stopped
        except Exception as err:  # the probe's: anything may come out of it (a timeout too)
            # Stopped, or the outage this probe was for has ended (a lease succeeded; a new one has its own wait).
            if self._stopped or self.down is not down:
                return
            down["delay"] = min(down["delay"] * 2, self.options.max_delay)
            self.worker.log.debug("the backend still does not answer: %s", str(err) or type(err).__name__)
            self._schedule()
            return
        if not self._stopped and self.down is down:
            self._recovered("the probe answered")

    @staticmethod
    async def _ask(probe: Probe) -> Any:
        if is_async(probe):
            return await probe()
        # A sync probe may block (an HTTP call): a thread of its own, not waited for past its timeout.
        result = await in_daemon_thread(probe, (), "switchyard-backend-probe")
        return await result if inspect.isawaitable(result) else result

    def _recovered(self, why: str) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.down = None
        self.worker.log.info("the backend answers again (%s): taking leases", why)
        self._send({"type": "backend", "available": True})
        self.worker.emit("backend", {"available": True})
