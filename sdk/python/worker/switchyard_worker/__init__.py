"""Switchyard worker SDK: run a Switchyard gateway's jobs with plain Python functions.

See README.md (sdk/python/worker/) and docs/worker-protocol.md for the wire protocol it speaks.
"""
__version__ = "0.1.0"

from .errors import InputFileError, JobCancelled, UploadError, WorkerError, WorkerRefusedError  # noqa: E402
from .job import Job  # noqa: E402
from .protocol import PROTOCOL_VERSIONS, LeaseInfo, LeaseRank, worker_socket_url  # noqa: E402
from .rank_stream import JobRank  # noqa: E402
from .types import Artifact, BackendOptions, InputFile, InputFileOptions, ReconnectOptions, UploadedArtifact, UploadOptions  # noqa: E402
from .upload import upload_artifact  # noqa: E402
from .worker import EVENTS, Worker  # noqa: E402

__all__ = [
    "Worker", "Job", "Artifact", "InputFile", "WorkerError", "InputFileError", "UploadError",
    "WorkerRefusedError", "JobCancelled", "ReconnectOptions", "UploadOptions", "InputFileOptions", "BackendOptions",
    "UploadedArtifact", "LeaseInfo", "LeaseRank", "JobRank", "PROTOCOL_VERSIONS", "EVENTS", "worker_socket_url",
    "upload_artifact", "__version__",
]
