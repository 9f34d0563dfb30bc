"""Python exceptions for altar's error codes.

Every failure a libaltar call reports becomes an AltarError (or a subclass
chosen by its code) carrying the code's name ("EINVAL"), the number, whether
a retry may help, and libaltar's own message, which names the field or the
file:line at fault.
"""

from __future__ import annotations

from typing import Any

from . import _native


class AltarError(Exception):
    """A libaltar call failed. `name` is altar's error name, `message` its text."""

    def __init__(self, code: int, name: str, message: str, retriable: bool = False) -> None:
        super().__init__(f"{name}: {message}")
        self.code = code
        self.name = name
        self.message = message
        self.retriable = retriable


class InvalidArgument(AltarError, ValueError):
    """Bad input: an invalid spec field, a malformed message, a bound exceeded (EINVAL, EDECODE, ETOOBIG)."""


class PathEscapeError(InvalidArgument):
    """A logical path that would leave its root, or is absolute (EPATH)."""


class ConfigError(AltarError, ValueError):
    """A configuration file or key altar refuses (ECONFIG)."""


class DigestMismatchError(AltarError, ValueError):
    """Bytes do not match the digest declared for them."""


class TransferIntegrityError(DigestMismatchError):
    """A staged or verified input is missing, not a regular file, or does not match its digest (EINTEGRITY)."""


class CapabilityNotSupported(AltarError, NotImplementedError):
    """The backend does not offer this operation (ENOTSUP), e.g. await_completion."""


class NotFound(AltarError, LookupError):
    """No such thing: a registry name, a record, a job (ENOTFOUND)."""


class BackendError(AltarError, RuntimeError):
    """The execution backend or its platform failed (EBACKEND)."""


class TransportError(AltarError, RuntimeError):
    """The log failed (ETRANSPORT)."""


class PredicateError(AltarError, ValueError):
    """A readiness rule cannot decide, e.g. all_expected_folds with no count label and no default (EPREDICATE)."""


class ReconcileStalled(AltarError, RuntimeError):
    """A group is blocked by a terminally failed shard and nothing handles it.

    `groups` lists the stalled groups as "kind:group_key" strings.
    """

    def __init__(self, groups: list[str]) -> None:
        super().__init__(-11, "ESTALLED", "reconciliation stalled on: " + ", ".join(groups))
        self.groups = list(groups)


_BY_NAME: dict[str, type[AltarError]] = {
    "EINVAL": InvalidArgument,
    "EDECODE": InvalidArgument,
    "ETOOBIG": InvalidArgument,
    "EPATH": PathEscapeError,
    "ECONFIG": ConfigError,
    "EINTEGRITY": TransferIntegrityError,
    "ENOTSUP": CapabilityNotSupported,
    "ENOTFOUND": NotFound,
    "EBACKEND": BackendError,
    "ETRANSPORT": TransportError,
    "EPREDICATE": PredicateError,
}


def from_code(rc: int, err: Any = None, context: str | None = None) -> AltarError:
    """The exception for a negative return code and the altar_error_t the call filled."""
    L = _native.lib()
    name = _native.s(L.altar_err_name(rc)) or "UNKNOWN"
    msg = ""
    retriable = False
    if err is not None:
        msg = _native.ffi.string(err.msg).decode("utf-8", "replace")
        retriable = bool(err.retriable)
    if not msg:
        msg = _native.s(L.altar_strerror(rc)) or "error"
    if context:
        msg = f"{context}: {msg}"
    cls = _BY_NAME.get(name, AltarError)
    return cls(rc, name, msg, retriable)


def check(rc: int, err: Any = None, context: str | None = None) -> int:
    """Raise for a negative return code, else return it."""
    if rc < 0:
        raise from_code(rc, err, context)
    return rc


def new_err() -> Any:
    return _native.ffi.new("altar_error_t *")
