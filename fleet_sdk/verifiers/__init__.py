"""Verifiers: the namespace they run in, finding their entry point, and running them here.

- :func:`run_local` / :func:`run_local_sync` run a verifier in this process (debugging only,
  not a sandbox: untrusted code runs on a server, the platform's or the local server's OS
  sandbox, ``fleet_local.sandbox``);
- :func:`bundle_verifier` / :func:`bundle_sha256` make the deterministic bundle the remote
  ``/v1/verifiers/execute`` takes (the sha256 is part of its request);
- :class:`SQLiteEnvironment` is a local ``env`` over SQLite files (``env.db("seed")``,
  ``env.db("current")``), whose databases also offer the public SDK's helpers
  (:class:`QueryBuilder`, :class:`SnapshotDiff`, :class:`IgnoreConfig`; docs/verifier-runtime.md).

Every runner returns a :class:`VerifierOutcome`; verifier faults are in ``outcome.error``.
Importing this package loads only the standard library and pydantic: running a verifier on the
platform, over HTTP, is the episode side's (``fleet_sdk.remote_verifier``).
"""

from .._public import publish
from ._bundle import BUNDLE_ENTRY_NAME, bundle_sha256, bundle_verifier
from ._entry import (
    VERIFIER_FILENAME,
    CallConvention,
    ErrorType,
    InvalidResultError,
    VerifierCodeError,
    find_entry_point,
    load_verifier,
    score_from_result,
)
from ._local import run_local, run_local_sync
from ._namespace import (
    TASK_FAILED_SCORE,
    TASK_SUCCESSFUL_SCORE,
    Database,
    Environment,
    QueryResultLike,
    build_namespace,
    contains_number,
    extract_numbers,
    normalized_contains,
    normalized_string_comparison,
)
from ._outcome import SandboxLayers, VerifierError, VerifierOutcome
from ._query import QueryBuilder
from ._snapshot import IgnoreConfig, SnapshotDiff
from ._sqlite import (
    DatabaseSnapshot,
    QueryResult,
    SQLiteDatabase,
    SQLiteEnvironment,
    UnknownDatabaseError,
)

__all__ = [
    "BUNDLE_ENTRY_NAME",
    "TASK_FAILED_SCORE",
    "TASK_SUCCESSFUL_SCORE",
    "VERIFIER_FILENAME",
    "CallConvention",
    "Database",
    "DatabaseSnapshot",
    "Environment",
    "ErrorType",
    "IgnoreConfig",
    "InvalidResultError",
    "QueryBuilder",
    "QueryResult",
    "QueryResultLike",
    "SQLiteDatabase",
    "SQLiteEnvironment",
    "SandboxLayers",
    "SnapshotDiff",
    "UnknownDatabaseError",
    "VerifierCodeError",
    "VerifierError",
    "VerifierOutcome",
    "build_namespace",
    "bundle_sha256",
    "bundle_verifier",
    "contains_number",
    "extract_numbers",
    "find_entry_point",
    "load_verifier",
    "normalized_contains",
    "normalized_string_comparison",
    "run_local",
    "run_local_sync",
    "score_from_result",
]

publish(__name__, globals(), __all__)
