"""Entry script of the verifier zygote, never imported.

Run as ``python -I -S _zygote_main.py RUNTIME_DIR CONTROL_FD``.

The zygote is one interpreter per server process, started by bubblewrap (``_zygote.py``) with the
runner and the verifier runtime imported, so a run does not pay for an interpreter and its imports.
It never runs verifier code. It reads requests on the unix socket it inherits (``CONTROL_FD``) (each: a JSON
header and, with ``SCM_RIGHTS``, the run's stdin, stdout, stderr, result pipe and its channel to
the server), and forks for each a *middle* process, which:

- dies with the zygote (``PR_SET_PDEATHSIG``) and closes every descriptor but the run's;
- takes new user, mount, network, IPC, UTS, PID and cgroup namespaces (``unshare``), maps uid and
  gid 65534 alone, sets ``max_user_namespaces`` of its user namespace to 0 (what bubblewrap's
  ``--disable-userns`` does one level up: no user namespace can be made below the run);
- mounts, in its own mount namespace: the run's databases read-only at ``/databases/<i>.sqlite``
  (a read-only tmpfs holding only them), an empty read-only tmpfs over each database root and
  over ``/proc``, a tmpfs of ``scratch_mb`` on ``/scratch`` and on ``/tmp``; the root and ``/dev``
  stay read-only as bubblewrap left them; the hostname is ``verifier``;
- forks the run (PID 1 of its PID namespace), waits for it and writes its wait status on the
  channel as bubblewrap's exit status says it (128 + N for signal N).

The run dies with the middle, makes its own session, checks that no user namespace can be made,
drops every capability (bounding and ambient sets included), sets ``no_new_privs``, loads the
jail's seccomp filter (``_seccomp.py``), forgets ``ctypes``, sends one byte on its channel (the
kernel attaches its pid, translated for the server: ``SCM_CREDENTIALS``), waits for the server's
go (the server has opened a pidfd on it and moved it into its cgroup by then), closes the
channel and runs ``_runner.main()`` as a fresh child does.

Standard library only, as ``_child.py``.
"""

import gc
import os
import sys
import types

_PACKAGE = "_fleet_verifier_sandbox"


def _package(name: str, path: list[str]) -> None:
    package = types.ModuleType(name)
    package.__path__ = path
    sys.modules[name] = package


def _bootstrap() -> int:
    _package(_PACKAGE, [os.path.dirname(os.path.realpath(__file__))])
    _package("fleet_sdk", [])
    _package("fleet_sdk.verifiers", [sys.argv[1]])
    gc.disable()
    try:
        __import__(f"{_PACKAGE}._runner")
        # What a fresh run has loaded when its runner starts: each run goes back to it.
        fresh = frozenset(sys.modules)
        # What a run may import before its hook, loaded once here, and the zygote's own.
        for name in ("_zygote_child", "_pickled_args", "_plain_pickle"):
            __import__(f"{_PACKAGE}.{name}")
    finally:
        gc.enable()
    gc.collect()
    gc.freeze()  # the forks share these pages instead of copying them on the first collection
    serve = sys.modules[f"{_PACKAGE}._zygote_child"].serve
    runner = sys.modules[f"{_PACKAGE}._runner"].main
    return int(serve(runner, int(sys.argv[2]), fresh))


if __name__ == "__main__":
    os._exit(_bootstrap())
