"""Which runner starts jailed verifier runs, and where the zygote's runs find their databases.

Apart from ``_zygote.py`` so that ``_jail.py`` (whose summary names the runner) and ``_zygote.py``
(which starts the zygote with ``_jail.py``'s command line) import it without a cycle.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

__all__ = [
    "DEFAULT_RUNNER",
    "RUNNERS",
    "RUNNER_ENV",
    "database_roots",
    "disabled_reason",
    "roots_covering",
    "runner",
    "set_database_roots",
    "set_runner",
]

RUNNER_ENV = "FLEET_VERIFIER_RUNNER"
"""The environment variable choosing the runner: ``zygote`` or ``fresh``."""

RUNNERS = ("fresh", "zygote")
DEFAULT_RUNNER = "zygote"
_settings: dict[str, object] = {}
_settings_lock = threading.Lock()


def set_runner(name: str | None) -> None:
    """Choose how jailed runs start: ``"zygote"`` (pre-forked) or ``"fresh"``.

    Args:
        name: The runner, or ``None`` to go back to the environment variable / default.

    Raises:
        ValueError: An unknown runner.
    """
    if name is not None and name not in RUNNERS:
        raise ValueError(f"unknown verifier runner {name!r}: one of {', '.join(RUNNERS)}")
    with _settings_lock:
        _settings["runner"] = name


def disabled_reason() -> str | None:
    """Why the zygote was turned off in this process (it could not set a run up), or ``None``."""
    with _settings_lock:
        reason = _settings.get("disabled")
    return reason if isinstance(reason, str) else None


def runner() -> str:
    """The runner chosen here (:func:`set_runner`, else ``FLEET_VERIFIER_RUNNER``, else zygote)."""
    with _settings_lock:
        chosen = _settings.get("runner")
        if _settings.get("disabled") is not None:
            return "fresh"
    if isinstance(chosen, str):
        return chosen
    value = os.environ.get(RUNNER_ENV, "").strip().lower()
    return value if value in RUNNERS else DEFAULT_RUNNER


def set_database_roots(roots: Sequence[str | os.PathLike[str]]) -> None:
    """The directories under which the databases of zygote runs live (the server's data dir).

    The zygote sees them read-only; each run sees only its own databases. A run whose databases
    lie elsewhere runs fresh. Changing them restarts the zygote on its next run.

    Args:
        roots: Existing directories (not ``/``).
    """
    resolved = []
    for root in roots:
        path = os.path.realpath(root)
        if path == "/" or not os.path.isdir(path):
            raise ValueError(f"a database root must be an existing directory other than /: {root!s}")
        resolved.append(path)
    with _settings_lock:
        _settings["roots"] = tuple(sorted(set(resolved)))


def database_roots() -> tuple[str, ...]:
    """The roots given to :func:`set_database_roots` (none by default)."""
    with _settings_lock:
        roots = _settings.get("roots", ())
    return roots if isinstance(roots, tuple) else ()


def roots_covering(databases: Sequence[str]) -> tuple[str, ...] | None:
    """The configured roots, when every (resolved) database lies below one of them."""
    roots = database_roots()
    if not roots:
        return None
    for path in databases:
        if not any(path.startswith(root.rstrip("/") + "/") for root in roots):
            return None
    return roots
