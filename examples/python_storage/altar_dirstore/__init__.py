"""DirectoryStorage: an altar Storage adapter in pure Python, objects kept as files under one root.

A starting point for your own adapter (an object store's SDK, a company file
service). A URI `SCHEME://BUCKET/KEY` names the file `<root>/BUCKET/KEY`,
whatever scheme altar.yaml maps to this adapter, so one class can serve
several schemes, each with its own root:

    storage:
      python:
        python: /opt/altar-py/bin/python
        schemes:
          vault: {adapter: dirstore, options: {root: /srv/vault}}

A plain path (no scheme) is taken relative to root. A path that would leave
root (`..`, or a link pointing out) is refused with PathEscapeError.

Options (keyword arguments, `options:` in altar.yaml): root (created when
missing; default ./var/dirstore).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import AsyncIterator
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import BinaryIO
from urllib.parse import unquote, urlsplit

from altar.execution import PathEscapeError, Storage


def _replace_atomically(dest: str, fill: Callable[[BinaryIO], object]) -> None:
    """Writes dest through a temp file and a rename: a reader never sees half a file."""
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    tmp = f"{dest}.dirstore-{uuid.uuid4().hex}"
    try:
        with open(tmp, "wb") as f:
            fill(f)
        os.replace(tmp, dest)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class DirectoryStorage(Storage):
    name = "dirstore"

    def __init__(self, root: str = "./var/dirstore") -> None:
        self.root = os.path.realpath(root)
        os.makedirs(self.root, exist_ok=True)

    def _file(self, path: str) -> str:
        """The local file a URI or a path names, never outside root."""
        u = urlsplit(path)
        rel = unquote(f"{u.netloc}/{u.path.lstrip('/')}" if u.scheme else path)
        full = os.path.realpath(os.path.join(self.root, rel.lstrip("/")))
        if full != self.root and not full.startswith(self.root + os.sep):
            raise PathEscapeError(-18, "EPATH", f"{path}: leaves the store's root {self.root}")
        return full

    # Every file operation runs in a thread: the bridge's event loop serves
    # one call at a time, but a large copy must not stall its signals.

    async def read_bytes(self, path: str) -> bytes:
        def run() -> bytes:
            with open(self._file(path), "rb") as f:
                return f.read()
        return await asyncio.to_thread(run)

    async def read_text(self, path: str) -> str:
        return (await self.read_bytes(path)).decode("utf-8")

    async def write_bytes(self, path: str, data: bytes) -> None:
        dest = self._file(path)
        await asyncio.to_thread(_replace_atomically, dest, lambda f: f.write(data))

    async def write_text(self, path: str, text: str) -> None:
        await self.write_bytes(path, text.encode("utf-8"))

    async def exists(self, path: str) -> bool:
        return os.path.isfile(self._file(path))

    async def mkdirs(self, path: str) -> None:
        await asyncio.to_thread(os.makedirs, self._file(path), exist_ok=True)

    async def upload(self, local_path: str, dest_path: str) -> None:
        dest = self._file(dest_path)

        def copy(f: BinaryIO) -> None:
            with open(local_path, "rb") as src:
                shutil.copyfileobj(src, f, 1 << 20)
        await asyncio.to_thread(_replace_atomically, dest, copy)

    @asynccontextmanager
    async def as_local_file(self, path: str) -> AsyncIterator[str]:
        # The object already is a local file: no copy.
        full = self._file(path)
        if not os.path.isfile(full):
            raise FileNotFoundError(f"{path}: no such object")
        yield full
