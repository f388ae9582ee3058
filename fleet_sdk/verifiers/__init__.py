"""Verifiers: the namespace they run in, finding their entry point, and running them here.

- :func:`run_local` / :func:`run_local_async` run a verifier in this process (debugging only,
  not a sandbox);
- :func:`run_sandboxed` / :func:`run_sandboxed_async` run it in a fresh, limited child process
  inside an OS jail (bubblewrap), with an audit hook as a second layer;
- :func:`bundle_verifier` / :func:`bundle_sha256` make the deterministic bundle the remote
  ``/v1/verifiers/execute`` takes;
- :class:`SQLiteEnvironment` is a local ``env`` over SQLite files (``env.db("seed")``,
  ``env.db("current")``), whose databases also offer the public SDK's helpers
  (:class:`QueryBuilder`, :class:`SnapshotDiff`, :class:`IgnoreConfig`; docs/verifier-runtime.md);
- :func:`load_plain` / :func:`dump_plain` read and write a verifier's arguments as a pickle of
  plain data only (the public SDK's ``args`` form); :class:`PickledArguments` reads such a
  pickle's shape without decoding it, for a sandboxed run to decode under its limits.

Every runner returns a :class:`VerifierOutcome`; verifier faults are in ``outcome.error``.
Importing this package loads only the standard library and pydantic: running a verifier on the
platform, over HTTP, is the episode side's (``fleet_sdk.remote_verifier``).
"""

from .._public import publish
from ._audit import DENIED_PREFIX, SandboxPolicy
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
from ._jail import JailStatus, jail_status
from ._local import run_local, run_local_async
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
from ._pickled_args import PickledArguments
from ._plain_pickle import PlainDataError, dump_plain, load_plain
from ._query import QueryBuilder
from ._sandbox import (
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT,
    OUTPUT_LIMIT_BYTES,
    JailUnavailableError,
    SandboxError,
    run_sandboxed,
    run_sandboxed_async,
)
from ._snapshot import IgnoreConfig, SnapshotDiff
from ._sqlite import (
    DatabaseSnapshot,
    QueryResult,
    SQLiteDatabase,
    SQLiteEnvironment,
    UnknownDatabaseError,
    harden_connection,
)

__all__ = [
    "BUNDLE_ENTRY_NAME",
    "DEFAULT_MEMORY_MB",
    "DEFAULT_TIMEOUT",
    "DENIED_PREFIX",
    "OUTPUT_LIMIT_BYTES",
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
    "JailStatus",
    "JailUnavailableError",
    "PickledArguments",
    "PlainDataError",
    "QueryBuilder",
    "QueryResult",
    "QueryResultLike",
    "SQLiteDatabase",
    "SQLiteEnvironment",
    "SandboxError",
    "SandboxLayers",
    "SandboxPolicy",
    "SnapshotDiff",
    "UnknownDatabaseError",
    "VerifierCodeError",
    "VerifierError",
    "VerifierOutcome",
    "build_namespace",
    "bundle_sha256",
    "bundle_verifier",
    "contains_number",
    "dump_plain",
    "extract_numbers",
    "find_entry_point",
    "harden_connection",
    "jail_status",
    "load_plain",
    "load_verifier",
    "normalized_contains",
    "normalized_string_comparison",
    "run_local",
    "run_local_async",
    "run_sandboxed",
    "run_sandboxed_async",
    "score_from_result",
]

publish(__name__, globals(), __all__)
