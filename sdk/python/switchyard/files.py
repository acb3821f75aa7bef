"""The account's files (``/v1/files``, docs/files.md): upload bytes or a local file, then put
the file's id in a file field of a job's input."""
from __future__ import annotations

import mimetypes
import os
from typing import TYPE_CHECKING, BinaryIO, Dict, Mapping, Optional, Union
from urllib.parse import quote

from ._transport import UNSET, read_all
from .errors import api_error_from
from .types import File, FilePage, FileQuota

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Files"]


class Files:
    """``client.files``."""

    def __init__(self, client: "Client") -> None:
        self._c = client

    def upload(self, data: Union[bytes, BinaryIO], *, filename: Optional[str] = None, content_type: Optional[str] = None,
               size: Optional[int] = None, timeout: Optional[float] = UNSET, headers: Optional[Mapping[str, str]] = None) -> File:
        """Uploads raw bytes, or a binary file object (streamed), as a file of the account.

        ``content_type`` is the declared type (``application/octet-stream`` when not given:
        the gateway reads the type from the bytes); ``size`` is sent as Content-Length for a
        file object (without it the body is sent chunked)."""
        h: Dict[str, str] = dict(headers or {})
        h["Content-Type"] = content_type or "application/octet-stream"
        if not isinstance(data, (bytes, bytearray)) and size is not None:
            h["Content-Length"] = str(size)
        _, body = self._c._transport.call("POST", "/v1/files", query={"filename": filename}, body=data, headers=h,
                                          timeout=self._c._timeout(timeout))
        return File.from_json(body)

    def upload_file(self, path: Union[str, "os.PathLike[str]"], *, filename: Optional[str] = None, content_type: Optional[str] = None,
                    timeout: Optional[float] = UNSET, headers: Optional[Mapping[str, str]] = None) -> File:
        """Uploads a local file, streamed; its name and (by extension) type are sent unless given."""
        path = os.fspath(path)
        with open(path, "rb") as fh:
            return self.upload(fh, filename=filename or os.path.basename(path),
                               content_type=content_type or mimetypes.guess_type(path)[0],
                               size=os.fstat(fh.fileno()).st_size, timeout=timeout, headers=headers)

    def get(self, file_id: str, *, timeout: Optional[float] = UNSET, headers: Optional[Mapping[str, str]] = None) -> File:
        _, body = self._c._transport.call("GET", f"/v1/files/{quote(file_id, safe='')}", headers=headers, timeout=self._c._timeout(timeout))
        return File.from_json(body)

    def list(self, *, limit: Optional[int] = None, cursor: Optional[str] = None, timeout: Optional[float] = UNSET,
             headers: Optional[Mapping[str, str]] = None) -> FilePage:
        """One page of the account's files, newest first, with what all of them hold against the quota."""
        _, body = self._c._transport.call("GET", "/v1/files", query={"limit": limit, "cursor": cursor}, headers=headers,
                                          timeout=self._c._timeout(timeout))
        return FilePage(data=[File.from_json(f) for f in body.get("data", [])], next_cursor=body.get("next_cursor"),
                        quota=FileQuota.from_json(body.get("quota")))

    def content(self, file_id: str, *, timeout: Optional[float] = UNSET, headers: Optional[Mapping[str, str]] = None) -> bytes:
        """The file's bytes."""
        h = {"Accept": "*/*"}
        h.update(headers or {})
        t = self._c._timeout(timeout)
        res = self._c._transport.open("GET", f"/v1/files/{quote(file_id, safe='')}/content", headers=h, timeout=t)
        try:
            data = read_all(res, t)
        finally:
            res.close()
        if res.status >= 400:
            raise api_error_from(res.status, res.headers, data)
        return data

    def delete(self, file_id: str, *, timeout: Optional[float] = UNSET, headers: Optional[Mapping[str, str]] = None) -> None:
        self._c._transport.call("DELETE", f"/v1/files/{quote(file_id, safe='')}", headers=headers, timeout=self._c._timeout(timeout))
