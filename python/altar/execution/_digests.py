"""SHA-256 content digests and verification records, by libaltar."""

from __future__ import annotations

import os
from typing import Any

from . import _errors, _native
from ._model import Transfer

ffi = _native.ffi


def _path(path: str | os.PathLike[str]) -> bytes:
    return os.fsencode(path)


def _check_digest(field: str, digest: str) -> None:
    err = _errors.new_err()
    rc = _native.lib().altar_digest_check(_native.b(field), _native.b(digest), err)
    if rc < 0:
        e = _errors.from_code(rc, err)
        raise ValueError(e.message)


def is_valid_digest(digest: str | None) -> bool:
    """Whether digest is exactly "sha256:" and 64 lowercase hex characters."""
    return bool(_native.lib().altar_digest_is_valid(_native.b(digest)))


def file_digest(path: str | os.PathLike[str]) -> str:
    """"sha256:<hex>" of one regular file (symlinks followed); TransferIntegrityError for anything else."""
    out = ffi.new("char[72]")
    err = _errors.new_err()
    _errors.check(_native.lib().altar_sha256_file(_path(path), out, err), err)
    return str(ffi.string(out).decode())


def has_verification_record(path: str | os.PathLike[str], digest: str) -> bool:
    """Whether path is a regular file whose current verification record names digest.

    Only metadata and the small record are read, never the file's bytes.
    """
    return bool(_native.lib().altar_has_verification_record(_path(path), _native.b(digest)))


def verification_record_path(path: str | os.PathLike[str]) -> str:
    """Where the verification record of path lives (beside it, a hidden file)."""
    p = _native.lib().altar_verification_record_path(_path(path))
    out = _native.take_string(p)
    if out is None:
        raise ValueError("verification_record_path: empty path")
    return out


def verify_file_digest(path: str | os.PathLike[str], digest: str, *, trust_record: bool = True,
                       record: bool = True) -> bool:
    """Check that path is a regular file whose bytes hash to digest.

    Returns True when the bytes were hashed, False when a current record
    accepted the file unread (only with trust_record). A successful hash
    writes a record when record is set. Raises ValueError for a malformed
    digest and TransferIntegrityError for a missing path, a directory or a
    mismatch.
    """
    _check_digest("digest", digest)
    hashed = ffi.new("_Bool *")
    err = _errors.new_err()
    _errors.check(_native.lib().altar_verify_file_digest(_path(path), _native.b(digest), trust_record, record,
                                                         hashed, err), err)
    return bool(hashed[0])


def verify_transfer_digest(transfer: Transfer, path: str, *, record: bool = False) -> None:
    """Check path against an input transfer's digest, hashing always; no digest, no check.

    With record, a match writes a verification record (only for a copy you own).
    Raises InvalidArgument (a ValueError) for a malformed digest and
    TransferIntegrityError for a missing path, a directory or a mismatch.
    """
    keep: list[Any] = []
    t = c_transfer(transfer, keep)
    err = _errors.new_err()
    _errors.check(_native.lib().altar_verify_transfer_digest(t, _path(path), record, err), err)


def c_transfer(transfer: Transfer, keep: list[Any]) -> Any:
    """A borrowed altar_transfer_t over transfer's strings (kept alive in keep)."""
    t = ffi.new("altar_transfer_t *")
    for name in ("uri", "logical_path", "locality_key", "digest"):
        v = getattr(transfer, name)
        if v is not None:
            c = ffi.new("char[]", v.encode("utf-8"))
            keep.append(c)
            setattr(t, name, c)
    keep.append(t)
    return t


def digest_verifier_program(trust_records: bool = True) -> str:
    """The POSIX sh program that checks files as verify_file_digest does.

    Run it as `sh -c PROGRAM NAME "<64 hex>  <path>" ...`; it prints one line
    per file and exits non-zero when any failed.
    """
    return _native.s(_native.lib().altar_digest_verifier_program(trust_records)) or ""
