"""The store's file I/O: which filesystem a store URI names, durable local writes, and
retried remote ones.

Local: a file is written under a hidden temporary name, flushed and fsync'ed, moved over its
final name with ``os.replace``, and its folder fsync'ed (the rename itself must reach the
disk), so a power cut leaves the old file or the new one, never a torn one. Object stores
(s3://, gs://, Azure): a file is put straight under its final name, since an object store
shows an object only once its upload is complete (no temporary, no copy, no folder markers:
one request for a small file). Other remote filesystems (hdfs://, ...): a hidden temporary
is put, then moved over the final name. Remote writes are retried with exponential backoff
on transient ``OSError``.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.fs as pafs

from orthotune.core import OrthotuneError

#: Files being written carry this hidden prefix until they are moved into place.
TEMPORARY_PREFIX = ".tmp-"
#: Remote writes: attempts, and the first backoff (doubled each retry, plus jitter).
REMOTE_ATTEMPTS, REMOTE_BACKOFF_S = 4, 0.5


#: Where a remote store's credentials come from: where pyarrow and the AWS and Google tools
#: read them, never from the store URI (which lands in search records and printed commands).
CREDENTIALS_HELP = ("give credentials as pyarrow and the AWS tools read them: AWS_ACCESS_KEY_ID and "
                    "AWS_SECRET_ACCESS_KEY, AWS_PROFILE (~/.aws/credentials), or the instance's role; for gs:// "
                    "GOOGLE_APPLICATION_CREDENTIALS")


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem and root path a store URI (or a local path) names.

    A URI carrying credentials (``s3://KEY:SECRET@bucket/...``, which pyarrow would accept) is
    refused without echoing them: the URI is saved in search records and printed in resume
    commands, so a secret in it would land in the store and in logs."""
    if "://" in str(uri):
        scheme, _, rest = str(uri).partition("://")
        authority = rest.split("/", 1)[0].split("?", 1)[0]
        if "@" in authority:
            shown = f"{scheme}://***@{authority.rsplit('@', 1)[1]}{rest[len(authority):]}"
            raise OrthotuneError(f"store URI {shown!r} carries credentials, which orthotune would save in the "
                                 f"store and print; remove them from the URI and {CREDENTIALS_HELP}")
        try:
            return pafs.FileSystem.from_uri(_s3_options(str(uri)) if scheme == "s3" else str(uri))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as error:
            raise OrthotuneError(f"store URI {uri!r} is not usable: {error}") from None
    return pafs.LocalFileSystem(), str(Path(uri).expanduser().resolve())


def _s3_options(uri: str) -> str:
    """``uri`` with ``allow_delayed_open``: a small file then goes up in one PUT request, not
    the three of a multipart upload (a user's own setting in the URI stays)."""
    if "allow_delayed_open=" in uri:
        return uri
    return f"{uri}{'&' if '?' in uri else '?'}allow_delayed_open=true"


def object_store(fs: pafs.FileSystem) -> bool:
    """Whether ``fs`` is an object store, where an object appears whole or not at all."""
    kinds = tuple(getattr(pafs, name) for name in ("S3FileSystem", "GcsFileSystem", "AzureFileSystem")
                  if hasattr(pafs, name))
    return isinstance(fs, kinds)


def remote_write(fs: pafs.FileSystem, final: str, write: Callable[[IO[bytes]], object], whole: bool = True) -> None:
    """One attempt on a remote filesystem. An object store, ``whole``: the file is made in
    memory and put as ``final`` itself (an object appears only once its upload is complete; a
    failed one leaves the old object). Else (a file too large to hold in memory, or another
    filesystem): put a hidden temporary, then move it over ``final`` (on an object store a
    server-side copy, which also appears whole)."""
    if whole and object_store(fs):
        buffer = pa.BufferOutputStream()
        write(buffer)
        data = buffer.getvalue()
        with fs.open_output_stream(final) as sink:
            sink.write(data)
        return
    folder = final.rsplit("/", 1)[0]
    if not object_store(fs):
        fs.create_dir(folder, recursive=True)
    temporary = f"{folder}/{TEMPORARY_PREFIX}{uuid.uuid4().hex}"
    try:
        with fs.open_output_stream(temporary) as sink:
            write(sink)
        fs.move(temporary, final)
    except BaseException:
        with contextlib.suppress(OSError):
            fs.delete_file(temporary)
        raise


def durable_write(final: str, write: Callable[[IO[bytes]], object]) -> None:
    """Write a local file so that a crash leaves the old content or the new, never a torn file:
    write a hidden temporary, flush and fsync it, ``os.replace`` it over ``final``, fsync the folder."""
    folder = os.path.dirname(final)
    make_folder(folder)
    temporary = os.path.join(folder, f"{TEMPORARY_PREFIX}{uuid.uuid4().hex}")
    try:
        with open(temporary, "wb") as sink:
            write(sink)
            sink.flush()
            os.fsync(sink.fileno())
        os.replace(temporary, final)
    except BaseException:
        with contextlib.suppress(OSError):  # never written, or a disk turned read-only meanwhile
            os.unlink(temporary)
        raise
    fsync_folder(folder)


def make_folder(folder: str) -> None:
    """``mkdir -p``, fsync'ing each new folder's parent so the new entry survives a crash."""
    if os.path.isdir(folder):
        return
    parent = os.path.dirname(folder)
    if parent != folder:
        make_folder(parent)
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder)
    fsync_folder(parent)


def fsync_folder(folder: str) -> None:
    """Make a folder's entries (a rename, a new file) durable; a no-op where folders cannot be opened."""
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def retrying(attempt: Callable[[], Any], attempts: int = REMOTE_ATTEMPTS, backoff: float = REMOTE_BACKOFF_S) -> Any:
    """Run ``attempt``, retrying a transient ``OSError`` with exponential backoff and jitter."""
    for number in range(attempts):
        try:
            return attempt()
        except OSError:
            if number == attempts - 1:
                raise
            time.sleep(backoff * 2**number * (1 + random.random()))
    return None
