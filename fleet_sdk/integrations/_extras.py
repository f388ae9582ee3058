"""Each adapter's framework is an extra: without it, importing the adapter says which one."""

from __future__ import annotations

__all__ = ["not_installed"]


def not_installed(package: str, *, extra: str, adapter: str) -> ModuleNotFoundError:
    """The error importing ``adapter`` raises when ``package`` is missing, naming its extra.

    A bare ``ModuleNotFoundError: No module named 'openenv'`` did not say how to install it.

    Args:
        package: The framework's top-level package (``openenv``).
        extra: The ``fleet-sdk`` extra that installs it.
        adapter: The adapter module, for the message.
    """
    return ModuleNotFoundError(
        f"{adapter} needs {package}, which is not installed: pip install 'fleet-sdk[{extra}]'",
        name=package,
    )
