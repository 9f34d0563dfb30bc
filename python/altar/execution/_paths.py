"""PathResolver: logical paths to the physical paths a task sees, by libaltar."""

from __future__ import annotations

from . import _errors, _native

ffi = _native.ffi


class PathResolver:
    """Prefixes a backend's mount root to a logical path and normalizes the result.

    An empty root is the identity (a gs:// URI passes unchanged). A logical
    path that is absolute or climbs out of the root raises PathEscapeError.
    """

    def __init__(self, mount_root: str = "") -> None:
        self.mount_root = mount_root

    def resolve(self, logical_path: str) -> str:
        out = ffi.new("char **")
        err = _errors.new_err()
        _errors.check(_native.lib().altar_path_resolve(_native.b(self.mount_root), _native.b(logical_path), out,
                                                       err), err)
        return _native.take_string(out[0]) or ""

    def __repr__(self) -> str:
        return f"PathResolver(mount_root={self.mount_root!r})"


def check_logical_path(logical_path: str) -> None:
    """Raise PathEscapeError unless logical_path is relative and stays inside its root."""
    err = _errors.new_err()
    _errors.check(_native.lib().altar_logical_path_check(_native.b(logical_path), err), err)
