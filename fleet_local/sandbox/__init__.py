"""The verifier OS sandbox of the local server: a fresh, limited child process per verifier run.

- :func:`run_sandboxed` / :func:`run_sandboxed_sync` run a verifier inside an OS jail
  (bubblewrap, ``_jail.py``; its seccomp filter, ``_seccomp.py``; a cgroup per run,
  ``_cgroup.py``), with an audit hook (``_audit.py``) as a second layer;
- a server's runs are forked from one pre-started jailed interpreter instead, the zygote
  (``_zygote.py``, ``_zygote_child.py``), each in namespaces and limits of its own, as a fresh
  jail's; ``FLEET_VERIFIER_RUNNER=fresh`` starts a fresh jail per run;
- :func:`jail_status` says whether the jail can start here and what it bounds;
- :func:`load_plain` / :func:`dump_plain` read and write a verifier's arguments as a pickle of
  plain data only (the public SDK's ``args`` form); :class:`PickledArguments` reads such a
  pickle's shape without decoding it (a bounded opcode walk, ``_pickle_shape.py``), for the
  jailed run to decode under its limits;
- :func:`harden_connection` refuses ``ATTACH`` and native-pointer functions on a SQLite
  connection, as the verifier runtime does for its read-only databases (the server's query
  endpoint uses it too);
- ``_process_groups.py`` keeps the process groups the server starts (verifier runs, browsers)
  from outliving it, SIGKILL included.

The child (``_child.py``, ``_runner.py``) loads only the standard-library modules of this
package and of the SDK's verifier runtime (``fleet_sdk.verifiers``), by path.
"""

from fleet_sdk.verifiers._sqlite import harden_connection

from ._audit import DENIED_PREFIX, SandboxPolicy
from ._jail import JailStatus, jail_status
from ._pickled_args import PickledArguments
from ._plain_pickle import PlainDataError, dump_plain, load_plain
from ._sandbox import (
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT,
    OUTPUT_LIMIT_BYTES,
    JailUnavailableError,
    SandboxError,
    run_sandboxed,
    run_sandboxed_sync,
)

__all__ = [
    "DEFAULT_MEMORY_MB",
    "DEFAULT_TIMEOUT",
    "DENIED_PREFIX",
    "OUTPUT_LIMIT_BYTES",
    "JailStatus",
    "JailUnavailableError",
    "PickledArguments",
    "PlainDataError",
    "SandboxError",
    "SandboxPolicy",
    "dump_plain",
    "harden_connection",
    "jail_status",
    "load_plain",
    "run_sandboxed",
    "run_sandboxed_sync",
]
