"""Stand-in for modal.exception (tests only)."""


class Error(Exception):
    pass


class NotFoundError(Error):
    pass
