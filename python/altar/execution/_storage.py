"""Storage: reading and writing files wherever they live, and libaltar's adapters.

The Storage base class holds the abstract operations and the defaults built
on them (CSV, text readers and writers). altar's own adapters (local files,
http(s), gs://, s3://) are libaltar's, one C call per operation, run in a
worker thread.
"""

from __future__ import annotations

import asyncio
import csv
import io
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, ClassVar, TypeVar

from . import _errors, _native
from ._backends import PluginRegistry, _cfg_value

ffi = _native.ffi
T = TypeVar("T")


class Storage(ABC):
    """Files by path, independent of where they are stored; name is the registry key."""

    name: ClassVar[str] = ""

    @abstractmethod
    async def read_text(self, path: str) -> str:
        """The file's text (UTF-8)."""

    @abstractmethod
    async def read_bytes(self, path: str) -> bytes:
        """The file's bytes."""

    @abstractmethod
    async def write_text(self, path: str, text: str) -> None:
        """Create or replace the file with text."""

    @abstractmethod
    async def write_bytes(self, path: str, data: bytes) -> None:
        """Create or replace the file with data."""

    @abstractmethod
    async def exists(self, path: str) -> bool:
        """Whether a file is stored at path."""

    @abstractmethod
    async def mkdirs(self, path: str) -> None:
        """Create a directory and its missing parents."""

    @abstractmethod
    async def upload(self, local_path: str, dest_path: str) -> None:
        """Put a local file into storage, streamed (never read whole into memory where the store allows)."""

    @abstractmethod
    def as_local_file(self, path: str) -> Any:
        """An async context manager yielding a local path for the stored file while the block runs."""

    async def read_csv(self, path: str, delimiter: str = "\t",
                       fieldnames: list[str] | None = None) -> list[dict[str, Any]]:
        """One dict per row, keyed by column (fieldnames None: the first row names them)."""
        text = await self.read_text(path)
        return [dict(r) for r in csv.DictReader(io.StringIO(text), delimiter=delimiter, fieldnames=fieldnames)]

    async def write_csv(self, path: str, rows: list[dict[str, Any]], delimiter: str = "\t",
                        fieldnames: list[str] | None = None) -> None:
        """Write rows with a header row (fieldnames None: the first row's keys)."""
        names = fieldnames or (list(rows[0].keys()) if rows else [])
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=names, delimiter=delimiter, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
        await self.write_text(path, buf.getvalue())

    async def open_text(self, path: str) -> io.StringIO:
        """The file's text as an in-memory file object."""
        return io.StringIO(await self.read_text(path))

    def open_text_writer(self, path: str) -> TextWriter:
        """A writer whose text reaches path, in one write_text, when its block exits cleanly."""
        return TextWriter(self, path)


class TextWriter:
    """Collects text in memory inside `async with` and writes it once, on a clean exit; an error drops it."""

    def __init__(self, storage: Storage, path: str) -> None:
        self.storage = storage
        self.path = path
        self._buf = io.StringIO()

    def write(self, text: str) -> int:
        return self._buf.write(text)

    async def __aenter__(self) -> TextWriter:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if exc_type is None:
            await self.storage.write_text(self.path, self._buf.getvalue())


class NativeStorage(Storage):
    """A Storage that is one of libaltar's adapters, opened by its registry name with its options."""

    def __init__(self, **options: Any) -> None:
        L = _native.lib()
        self._lock = threading.Lock()
        self._s: Any = ffi.NULL
        opts = ffi.new("altar_strmap_t *")
        ps = ffi.new("altar_storage_t **")
        err = _errors.new_err()
        try:
            for k, v in options.items():
                _errors.check(L.altar_strmap_set(opts, k.encode("utf-8"), _cfg_value(k, v)))
            _errors.check(L.altar_storage_open(_native.b(self.name), opts, ps, err), err)
            self._s = ps[0]
        finally:
            L.altar_strmap_clear(opts)

    def close(self) -> None:
        with self._lock:
            if self._s != ffi.NULL:
                _native.lib().altar_storage_close(self._s)
                self._s = ffi.NULL

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    async def _call(self, fn: Callable[[Any, Any], T]) -> T:
        def run() -> T:
            with self._lock:
                if self._s == ffi.NULL:
                    raise _errors.AltarError(-22, "ESTATE", f"storage {self.name}: closed")
                return fn(self._s, _errors.new_err())
        return await asyncio.to_thread(run)

    async def read_bytes(self, path: str) -> bytes:
        def run(s: Any, err: Any) -> bytes:
            L = _native.lib()
            buf = ffi.new("altar_buf_t *")
            try:
                _errors.check(L.altar_storage_read_bytes(s, _native.b(path), buf, err), err)
                return bytes(ffi.buffer(buf.data, buf.len)) if buf.len else b""
            finally:
                L.altar_buf_free(buf)
        return await self._call(run)

    async def read_text(self, path: str) -> str:
        def run(s: Any, err: Any) -> str:
            p = ffi.new("char **")
            _errors.check(_native.lib().altar_storage_read_text(s, _native.b(path), p, ffi.NULL, err), err)
            return _native.take_string(p[0]) or ""
        return await self._call(run)

    async def write_bytes(self, path: str, data: bytes) -> None:
        def run(s: Any, err: Any) -> None:
            d = bytes(data)
            _errors.check(_native.lib().altar_storage_write_bytes(s, _native.b(path), d, len(d), err), err)
        await self._call(run)

    async def write_text(self, path: str, text: str) -> None:
        def run(s: Any, err: Any) -> None:
            _errors.check(_native.lib().altar_storage_write_text(s, _native.b(path), _native.b(text), err), err)
        await self._call(run)

    async def exists(self, path: str) -> bool:
        def run(s: Any, err: Any) -> bool:
            out = ffi.new("_Bool *")
            _errors.check(_native.lib().altar_storage_exists(s, _native.b(path), out, err), err)
            return bool(out[0])
        return await self._call(run)

    async def mkdirs(self, path: str) -> None:
        def run(s: Any, err: Any) -> None:
            _errors.check(_native.lib().altar_storage_mkdirs(s, _native.b(path), err), err)
        await self._call(run)

    async def upload(self, local_path: str, dest_path: str) -> None:
        def run(s: Any, err: Any) -> None:
            _errors.check(_native.lib().altar_storage_upload(s, os.fsencode(local_path), _native.b(dest_path), err),
                          err)
        await self._call(run)

    async def copy_from_local(self, local_path: str, dest_path: str) -> None:
        """Copy a local file into storage; copying a file onto itself does nothing."""
        def run(s: Any, err: Any) -> None:
            _errors.check(_native.lib().altar_storage_copy_from_local(s, os.fsencode(local_path),
                                                                      _native.b(dest_path), err), err)
        await self._call(run)

    @asynccontextmanager
    async def as_local_file(self, path: str) -> AsyncIterator[str]:
        L = _native.lib()
        lf = ffi.new("altar_local_file_t *")

        def run(s: Any, err: Any) -> str:
            _errors.check(L.altar_storage_as_local_file(s, _native.b(path), lf, err), err)
            return _native.s(lf.path) or ""
        try:
            yield await self._call(run)
        finally:
            L.altar_local_file_release(lf)

    async def read_csv(self, path: str, delimiter: str = "\t",
                       fieldnames: list[str] | None = None) -> list[dict[str, Any]]:
        def run(s: Any, err: Any) -> list[dict[str, Any]]:
            L = _native.lib()
            out = ffi.new("altar_csv_t *")
            keep = [ffi.new("char[]", f.encode("utf-8")) for f in fieldnames or []]
            names = ffi.new("const char *[]", keep) if keep else ffi.NULL
            try:
                _errors.check(L.altar_storage_read_csv(s, _native.b(path), delimiter.encode()[:1], names, len(keep),
                                                       out, err), err)
                rows: list[dict[str, Any]] = []
                for i in range(out.n_rows):
                    m = out.rows[i]
                    rows.append({_native.s(m.keys[j]) or "": _native.s(m.vals[j]) or "" for j in range(m.n)})
                return rows
            finally:
                L.altar_csv_clear(out)
        return await self._call(run)

    async def write_csv(self, path: str, rows: list[dict[str, Any]], delimiter: str = "\t",
                        fieldnames: list[str] | None = None) -> None:
        def run(s: Any, err: Any) -> None:
            L = _native.lib()
            maps = ffi.new("altar_strmap_t[]", max(1, len(rows)))
            keep = [ffi.new("char[]", f.encode("utf-8")) for f in fieldnames or []]
            names = ffi.new("const char *[]", keep) if keep else ffi.NULL
            try:
                for i, row in enumerate(rows):
                    for k, v in row.items():
                        _errors.check(L.altar_strmap_set(ffi.addressof(maps, i), str(k).encode("utf-8"),
                                                         str(v).encode("utf-8")))
                _errors.check(L.altar_storage_write_csv(s, _native.b(path), maps, len(rows), delimiter.encode()[:1],
                                                        names, len(keep), err), err)
            finally:
                for i in range(len(rows)):
                    L.altar_strmap_clear(ffi.addressof(maps, i))
        await self._call(run)


class LocalStorage(NativeStorage):
    """Files on this machine's filesystem (paths or file:// URIs)."""

    name = "local"


class FileStorage(NativeStorage):
    """The local adapter under the name file:// URIs select."""

    name = "file"


class HttpStorage(NativeStorage):
    """http:// URLs (read; writes where the server accepts PUT)."""

    name = "http"


class HttpsStorage(NativeStorage):
    """https:// URLs."""

    name = "https"


class GcsStorage(NativeStorage):
    """gs:// objects in Google Cloud Storage."""

    name = "gs"


class S3Storage(NativeStorage):
    """s3:// objects in S3 or an S3-compatible store."""

    name = "s3"


_storage_registry: PluginRegistry[type[Storage]] | None = None


def get_storage_registry() -> PluginRegistry[type[Storage]]:
    """The shared altar.storage registry: local, file, http, https, gs (also gcs), s3, and plug-ins."""
    global _storage_registry
    if _storage_registry is None:
        _storage_registry = PluginRegistry("altar.storage", {
            "local": LocalStorage, "file": FileStorage, "http": HttpStorage, "https": HttpsStorage,
            "gs": GcsStorage, "gcs": GcsStorage, "s3": S3Storage,
        })
    return _storage_registry
