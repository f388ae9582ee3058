"""What plain data is bounded by, and the error past the bounds: shared by the pickle's shape
(``_pickle_shape.py``) and the value built from it (``_plain_pickle.py``).

Standard library only: the sandbox child loads this file without importing ``fleet_sdk``.
"""

from __future__ import annotations

from fleet_sdk.verifiers._compat import ErrorBase

__all__ = ["MAX_DEPTH", "MAX_ITEMS", "PlainDataError"]

MAX_ITEMS = 100_000
"""At most this many values (containers and scalars, counted each time they are reached)."""

MAX_DEPTH = 64
"""At most this many containers nested in each other."""


class PlainDataError(ValueError, ErrorBase):
    """A value (or pickle) is not plain data: builtin containers and scalars, of bounded size.

    Attributes:
        offending: What was refused: a type or global name such as ``"datetime.datetime"``.
    """

    def __init__(self, message: str, *, offending: str | None = None) -> None:
        super().__init__(message)
        self.offending = offending
