"""Files: upload bytes and a local file, get, list, content, delete."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from conftest import Gateway, png_of
from switchyard import Client, FileQuota, NotFoundError


def test_files(gateway: Gateway, client: Client, tmp_path: Path) -> None:
    data = png_of(3)
    before = client.files.list(limit=1).quota
    assert before is not None and before.quota_bytes == gateway.quota
    uploaded = client.files.upload(data, filename="photo.png")
    assert re.match(r"^file_[0-9A-Z]{26}$", uploaded.id)
    assert (uploaded.filename, uploaded.content_type, uploaded.size) == ("photo.png", "image/png", len(data))
    assert uploaded.sha256 == hashlib.sha256(data).hexdigest() and uploaded.url == f"{gateway.url}/v1/files/{uploaded.id}"

    path = tmp_path / "local.png"
    path.write_bytes(png_of(4))
    local = client.files.upload_file(path)
    assert local.filename == "local.png" and local.content_type == "image/png"
    with open(path, "rb") as fh:  # a file object without a size is sent chunked
        streamed = client.files.upload(fh, filename="streamed.png")
    assert streamed.size == len(png_of(4))

    assert client.files.get(uploaded.id) == uploaded
    page = client.files.list(limit=1)
    assert [f.id for f in page.data] == [streamed.id] and page.next_cursor, "newest first"
    # The quota counts every file of the account, not only the page's one.
    assert page.quota == FileQuota(used_bytes=before.used_bytes + len(data) + 2 * len(png_of(4)), quota_bytes=gateway.quota)
    assert client.files.content(uploaded.id) == data

    for file_id in (uploaded.id, local.id, streamed.id):
        client.files.delete(file_id)
    with pytest.raises(NotFoundError):
        client.files.get(uploaded.id)
    with pytest.raises(NotFoundError):
        client.files.content(uploaded.id)
    assert client.files.list(limit=1).quota == before, "deleting gives the bytes back"
