"""What handlers return and receive, and the worker's option groups."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Union

PathLike = Union[str, "os.PathLike[str]"]


@dataclass
class Artifact:
    """A file a handler produced: bytes in memory (``data``) or a file on disk (``path``).

    ``Artifact("image.png", png_bytes, "image/png")`` or ``Artifact(path="/tmp/out.glb")``.

    ``name`` is what callers see (name files as the kind's ``output_artifacts`` in
    ``/v1/capabilities`` do: ``image.png``, ``mesh.glb``...); for a path it defaults to the
    file's name. ``content_type`` may be left out: the gateway then goes by the extension.
    """

    name: Optional[str] = None
    data: Optional[bytes] = None
    content_type: Optional[str] = None
    path: Optional[PathLike] = None

    def __post_init__(self) -> None:
        if (self.data is None) == (self.path is None):
            raise ValueError("an Artifact has either data (bytes) or a path")
        if self.data is not None and not isinstance(self.data, (bytes, bytearray, memoryview)):
            raise TypeError("Artifact.data must be bytes")
        if self.name is None:
            if self.path is None:
                raise ValueError("an Artifact made of bytes needs a name")
            self.name = os.path.basename(os.fspath(self.path))
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("an Artifact needs a non-empty name")


@dataclass(frozen=True)
class InputFile:
    """An input file fetched from the gateway to ``path`` and checked against its sha256.

    The file is deleted when the lease ends.
    """

    path: str
    size: int
    content_type: str
    sha256: str


@dataclass(frozen=True)
class UploadedArtifact:
    """The gateway's answer to an artifact upload."""

    url: str
    sha256: str
    size: int
    content_type: str
    expires_at: Optional[str] = None


@dataclass
class ReconnectOptions:
    """Backoff between connection tries, in seconds, with full jitter (0 up to the bound)."""

    initial_delay: float = 0.25
    max_delay: float = 15.0
    factor: float = 2.0


@dataclass
class UploadOptions:
    """Retries and timeouts of artifact uploads (seconds)."""

    #: Further tries after a network error or a transient answer (408, 425, 429, 5xx).
    retries: int = 3
    #: Wait before the first retry, doubled at each one (with jitter).
    retry_delay: float = 0.25
    #: Gives up on one try when the socket is silent this long.
    timeout: float = 120.0
    #: How long ``503 unavailable`` (a datastore outage on the gateway) is waited out on top of ``retries``.
    outage: float = 60.0


@dataclass
class InputFileOptions:
    """Retries, timeouts and the temporary directory of input files (seconds)."""

    retries: int = 3
    retry_delay: float = 0.25
    #: Gives up on one try when no byte has come for this long.
    stall_timeout: float = 60.0
    outage: float = 60.0
    #: Where each lease gets its own temporary folder (default: the system's).
    tmp_dir: Optional[str] = None


@dataclass
class BackendOptions:
    """When the backend is down, how long to wait before asking ``probe`` again (seconds)."""

    #: First wait after a lease failed ``upstream_unavailable``; doubles after each failed probe,
    #: and each time the backend goes down again before a lease succeeded.
    first_delay: float = 1.0
    #: Longest wait between two probes.
    max_delay: float = 30.0
    #: A probe that has not answered within this has failed.
    probe_timeout: float = 10.0
