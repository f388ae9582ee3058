"""The verifier OS sandbox is the server's: the SDK a trainer imports carries none of it.

The jail, its seccomp filter, cgroups, the audit hook, the child's runner and the process
groups live in ``fleet_local/sandbox`` (docs/architecture.md says why); nothing the server
alone needed stays public in the SDK.
"""

from __future__ import annotations

import importlib.util
import pkgutil
import re
from pathlib import Path

import fleet_local.sandbox
import fleet_sdk
import fleet_sdk.verifiers

SDK = Path(fleet_sdk.__file__).parent
SANDBOX_WORDS = re.compile(r"bwrap|bubblewrap|seccomp|cgroup|addaudithook|killpg|RLIMIT_|setrlimit")


def test_no_sdk_module_holds_jail_seccomp_cgroup_or_audit_hook_code() -> None:
    offenders = sorted(
        str(p.relative_to(SDK)) for p in SDK.rglob("*.py") if SANDBOX_WORDS.search(p.read_text())
    )
    assert offenders == []


def test_what_only_the_server_used_is_not_public_in_the_sdk() -> None:
    server_only = {
        "run_sandboxed_sync",
        "run_sandboxed",
        "jail_status",
        "JailStatus",
        "SandboxPolicy",
        "load_plain",
        "dump_plain",
        "harden_connection",
        "SandboxError",
        "JailUnavailableError",
        "PlainDataError",
    }
    assert not server_only & set(fleet_sdk.verifiers.__all__)
    assert not server_only & set(fleet_sdk.__all__)
    assert server_only <= set(fleet_local.sandbox.__all__)
    public = {info.name for info in pkgutil.iter_modules(fleet_sdk.__path__) if not info.name.startswith("_")}
    assert not public & {"process_groups", "png", "local", "specs"}
    for name in ("fleet_sdk.process_groups", "fleet_sdk.png", "fleet_sdk.verifiers._sandbox"):
        assert importlib.util.find_spec(name) is None, name
