"""``Worker``: a worker process of a Switchyard fleet, with your functions as its handlers."""
from __future__ import annotations

import asyncio
import logging
import signal
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from .backend_watch import BackendWatch, Probe
from .connection import GatewayConnection
from .errors import WorkerRefusedError
from .lease import LeaseRunner
from .mover import LeaseMover
from .options import check_connection, check_identity, check_probe, machine_info, resolve_kinds
from .protocol import MODELS_PROTOCOL, PROTOCOL_VERSIONS, check_models
from .types import BackendOptions, InputFileOptions, ReconnectOptions, UploadOptions
from .worker_frames import WorkerFrames

Handler = Callable[..., Any]
EVENTS = ("registered", "lease", "completed", "failed", "dropped", "disconnected", "drain", "refused", "backend", "stopped", "gateway_error")


class Worker(WorkerFrames):
    """Connects out to a gateway over the worker protocol and runs its leases with your handlers.

    Handlers are plain functions ``(job) -> result``, sync (run in a thread, one per slot) or
    async (run on the event loop), one per kind::

        worker = Worker(gateway="https://gw.example", token="swt_...")

        @worker.handler("inference:image:generate")
        def generate(job):
            return {"files": [Artifact("image.png", make_png(job.input["prompt"]))], "width": 512, "height": 512}

        worker.run()   # until SIGINT/SIGTERM, then a graceful stop

    See README.md for the handler contract and the options.
    """

    def __init__(
        self,
        gateway: Optional[str] = None,
        token: Optional[str] = None,
        *,
        handlers: Optional[Dict[str, Handler]] = None,
        kinds: Union[Sequence[str], str, None] = None,
        tier: str = "open",
        slots: int = 1,
        models: Optional[Dict[str, List[Any]]] = None,
        hardware: Optional[Dict[str, Any]] = None,
        software: Optional[Dict[str, Any]] = None,
        reconnect: Optional[ReconnectOptions] = None,
        upload: Optional[UploadOptions] = None,
        input_files: Optional[InputFileOptions] = None,
        progress_interval: float = 0.25,
        report_timeout: float = 30.0,
        protocols: Sequence[int] = PROTOCOL_VERSIONS,
        identity: Optional[str] = None,
        probe: Optional[Probe] = None,
        backend: Optional[BackendOptions] = None,
        logger: Optional[logging.Logger] = None,
    ) -> None:
        self.url, self.token = check_connection(gateway, token, tier, slots, protocols)
        #: The worker's name for itself, the same on every connection (protocol 5): registering again
        #: under it retires the old connection at once, so the fleet never counts this worker twice.
        self.identity = check_identity(identity)
        check_probe(probe)
        self.probe = probe
        self.backend_options = backend or BackendOptions()
        self.tier = tier
        self.slots = slots
        self.handlers: Dict[str, Handler] = {}
        for kind, fn in (handlers or {}).items():
            self.add_handler(kind, fn)
        self._kinds = kinds
        self._models = models
        self.hardware, self.software = machine_info(hardware, software)
        self.reconnect = reconnect or ReconnectOptions()
        self.upload = upload or UploadOptions()
        self.input_files = input_files or InputFileOptions()
        self.progress_interval = progress_interval
        self.report_timeout = report_timeout
        self.protocols = list(protocols)
        self.log = logger or logging.getLogger("switchyard_worker")
        #: The gateway's id for the current registration, and the protocol version agreed.
        self.worker_id: Optional[str] = None
        self.protocol = 0
        self.kinds: List[str] = []
        self.models: Optional[Dict[str, List[Dict[str, Any]]]] = None
        self.state = "idle"  # idle | running | stopping | stopped
        self._listeners: Dict[str, List[Callable[..., Any]]] = {e: [] for e in EVENTS}
        self._started: Optional["asyncio.Future[None]"] = None
        self._finished: Optional["asyncio.Future[None]"] = None
        self._stopping: Optional[Dict[str, Any]] = None
        #: A gateway older than protocol 5 refused ``identity`` in the register: it is left out from then on.
        self._identity_refused = False
        self.runner: LeaseRunner
        self.mover: LeaseMover
        self.connection: GatewayConnection
        self.backend_watch: BackendWatch

    # -- handlers and events -----------------------------------------------------------------

    def add_handler(self, kind: str, fn: Handler) -> None:
        """Registers ``fn`` for ``kind`` (``"*"``: any kind without its own handler)."""
        if not isinstance(kind, str) or not kind:
            raise ValueError("a kind is a non-empty string")
        if not callable(fn):
            raise TypeError(f"the handler of {kind} is not callable")
        self.handlers[kind] = fn

    def handler(self, *kinds: str) -> Callable[[Handler], Handler]:
        """Decorator: ``@worker.handler("inference:image:generate")`` (several kinds may share one)."""
        if not kinds:
            raise ValueError("name at least one kind")

        def register(fn: Handler) -> Handler:
            for kind in kinds:
                self.add_handler(kind, fn)
            return fn

        return register

    def handler_for(self, kind: str) -> Optional[Handler]:
        return self.handlers.get(kind) or self.handlers.get("*")

    def on(self, event: str, callback: Callable[..., Any]) -> None:
        """Calls ``callback`` on the event loop for each ``event``: one of EVENTS."""
        if event not in self._listeners:
            raise ValueError(f"unknown event {event!r}; one of {', '.join(EVENTS)}")
        self._listeners[event].append(callback)

    def emit(self, event: str, *args: Any) -> None:
        for cb in list(self._listeners.get(event, ())):
            try:
                cb(*args)
            except Exception:
                self.log.exception("a %s listener failed", event)

    # -- state -------------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        conn = self.connection.current if self.state != "idle" else None
        return conn is not None and conn.registered and not conn.closed

    @property
    def active_leases(self) -> int:
        """Leases held: running, waiting for a slot, or waiting for the answer to their report."""
        return len(self.runner.leases) if self.state != "idle" else 0

    @property
    def running(self) -> int:
        """Handler calls running now (never more than ``slots``)."""
        return self.runner.busy if self.state != "idle" else 0

    def may_start(self) -> bool:
        return self.state == "running"

    def is_running(self) -> bool:
        return self.state == "running"

    def may_connect(self) -> bool:
        """A running worker connects; so does a stopping one whose leases are moving to another instance."""
        forced = bool(self._stopping and self._stopping["forced"])
        return self.state == "running" or (self.state == "stopping" and self.mover.size > 0 and not forced)

    def _resolve_kinds(self) -> List[str]:
        return resolve_kinds(self._kinds, self.handlers)

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Connects and registers. Returns once the gateway accepted the worker (a gateway that
        does not answer is retried with backoff meanwhile); raises WorkerRefusedError if refused."""
        if self.state != "idle":
            raise RuntimeError(f"the worker is already {'started' if self.state == 'running' else self.state}")
        self.kinds = self._resolve_kinds()
        if self._models is not None:
            self.models = check_models(self._models, self.kinds, self.slots)
        loop = asyncio.get_running_loop()
        self.runner = LeaseRunner(self)
        self.mover = LeaseMover(self, self.runner)
        self.connection = GatewayConnection(self)
        self.backend_watch = BackendWatch(self, self.probe, self.backend_options)
        self._started = loop.create_future()
        self._finished = loop.create_future()
        self.state = "running"
        self.connection.open()
        await asyncio.shield(self._started)

    async def wait(self) -> None:
        """Returns when the worker has stopped; raises WorkerRefusedError if the gateway refused it."""
        if self._finished is None:
            return
        await asyncio.shield(self._finished)

    async def serve(self) -> None:
        """``start()``, then ``wait()``."""
        await self.start()
        await self.wait()

    def run(self, stop_timeout: float = 30.0) -> None:
        """Runs the worker until SIGINT or SIGTERM, then stops gracefully (blocking; the main thread)."""

        async def main() -> None:
            loop = asyncio.get_running_loop()
            signals = []

            def on_signal() -> None:
                # The first signal stops gracefully; a second one cancels the running jobs at once.
                signals.append(1)
                asyncio.ensure_future(self.stop(stop_timeout if len(signals) == 1 else 0))

            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(sig, on_signal)
                except (NotImplementedError, RuntimeError):
                    pass
            await self.serve()

        if not logging.getLogger().handlers and not self.log.handlers:
            logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        asyncio.run(main())

    def set_models(self, models: Dict[str, List[Any]]) -> None:
        """Replaces the model list (after loading or unloading a model); sent at once on protocol 3."""
        checked = check_models(models, self.kinds or self._resolve_kinds(), self.slots)
        self._models = models
        self.models = checked
        if self.state == "idle":
            return
        conn = self.connection.current
        if conn is not None and conn.registered and not conn.closed and self.protocol >= MODELS_PROTOCOL:
            conn.send({"type": "models", "models": checked})

    async def stop(self, timeout: Optional[float] = 30.0) -> None:
        """Graceful stop: no new lease starts, running ones finish and report, then the socket
        closes (leases that arrived meanwhile go back to the queue). After ``timeout`` seconds
        (0: at once; None: never) running handlers are cancelled and the socket closed."""
        if self.state in ("idle", "stopped"):
            self.state = "stopped"
            if self._finished is not None and not self._finished.done():
                self._finished.set_result(None)
            return
        if self._stopping is not None:
            if timeout is not None:
                self._schedule_abort(timeout)
            await asyncio.shield(self._stopping["done"])
            return
        loop = asyncio.get_running_loop()
        self.state = "stopping"
        if self.mover.size == 0:
            self.connection.cancel_reconnect()
        self._stopping = {"done": loop.create_future(), "forced": False, "abort": None, "give_up": None}
        if self._started is not None and not self._started.done():
            self._started.set_exception(RuntimeError("the worker was stopped before it registered"))
            self._started.exception()
        self.log.info("stopping: no new leases; waiting for %d running", self.runner.busy)
        conn = self.connection.current
        if conn is not None and not conn.registered and self.mover.size == 0:
            conn.terminate()
        if timeout is not None:
            self._schedule_abort(timeout)
        self.check_idle()
        self.check_stopped()
        await asyncio.shield(self._stopping["done"])

    def _schedule_abort(self, timeout: float) -> None:
        s = self._stopping
        assert s is not None
        if s["abort"] is not None:
            s["abort"].cancel()

        def abort() -> None:
            if s["forced"]:
                return
            s["forced"] = True
            self.log.warning("stop timeout: cancelling %d running lease(s) (they go back to the queue)", self.runner.busy)
            for lease in list(self.runner.leases.values()):
                self.runner.abort(lease, "stopping")
            if self.connection.current is not None:
                self.connection.current.close(1000, "worker stopping")
            # Handlers that ignore their cancellation are not waited for forever.
            s["give_up"] = asyncio.get_running_loop().call_later(5.0, self._finish_stop)
            self.check_stopped()

        s["abort"] = asyncio.get_running_loop().call_later(max(0.0, timeout), abort)

    def on_refused(self, err: WorkerRefusedError) -> None:
        self.state = "stopping"
        loop = asyncio.get_running_loop()
        self._stopping = {"done": loop.create_future(), "forced": True, "abort": None, "give_up": None}
        self._stopping["done"].set_result(None)
        if self._started is not None and not self._started.done():
            self._started.set_exception(err)
        self.emit("refused", err)
        self._finish_stop(err)

    def settled(self) -> None:
        """A lease ended: the socket may now close (stopping, drained) and the worker stop."""
        self.check_idle()
        self.check_stopped()

    def check_idle(self) -> None:
        """Closes the socket once its work is done: when stopping (held leases go back) or drained."""
        conn = self.connection.current
        if conn is None or conn.closed or not conn.registered:
            return
        held = [self.runner.leases[i] for i in conn.leases if i in self.runner.leases]
        if self.state == "stopping":
            if any(l.phase in ("running", "reporting") for l in held):
                return
            self.log.info("closing the connection (%d lease(s) go back to the queue)", len(held))
            conn.close(1000, "worker stopping")
        elif conn.draining and not held:
            conn.reconnect_now = True
            conn.close(1000, "drained")

    def check_stopped(self) -> None:
        if self.state != "stopping" or self._stopping is None:
            return
        conn = self.connection.current
        if conn is not None and not conn.closed:
            return
        if self.runner.busy > 0 or self.mover.size > 0:
            return
        self._finish_stop()

    def _finish_stop(self, err: Optional[BaseException] = None) -> None:
        if self.state == "stopped":
            return
        self.state = "stopped"
        self.backend_watch.stop()
        self.connection.cancel_reconnect()
        s = self._stopping
        if s is not None:
            for key in ("abort", "give_up"):
                if s[key] is not None:
                    s[key].cancel()
        conn = self.connection.current
        if conn is not None and not conn.closed:
            conn.terminate()
        self.mover.lose_moves("the worker stopped")
        for lease in list(self.runner.leases.values()):
            self.runner.abort(lease, "stopping")
            if lease.phase == "pending":
                self.runner.drop(lease, "the worker stopped")
        if self.runner.busy > 0:
            self.log.warning("stopped with %d handler(s) still running (they ignore their cancellation)", self.runner.busy)
        else:
            self.log.info("stopped")
        if s is not None and not s["done"].done():
            s["done"].set_result(None)
        self.emit("stopped")
        if self._finished is not None and not self._finished.done():
            if err is not None:
                self._finished.set_exception(err)
                # Read by wait(); no "exception never retrieved" warning if nobody waits.
                self._finished.exception()
            else:
                self._finished.set_result(None)
