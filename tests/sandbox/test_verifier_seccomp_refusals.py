"""The jail's seccomp filter against the calls round 3 found still open, with the audit hook off.

Round 3 opened ``socket(AF_VSOCK)`` (a virtual machine's host services listen there, and the
jail's empty network namespace does not cover it), ``AF_NETLINK`` sockets, a System V message
queue (``msgget``), and called ``modify_ldt`` and ``move_pages``, all from inside the jail. Each
is refused with ``EPERM`` now; ``AF_UNIX`` (asyncio's socketpair) and the inet families (kept
off the network by the namespace) still open.
"""

from __future__ import annotations

import errno
import platform
import socket

import pytest
from _jail_runs import probes, run_without_audit_hook

from fleet_local.sandbox import _jail, run_sandboxed_sync

pytestmark = [
    pytest.mark.skipif(
        not _jail.jail_status().available or not _jail.jail_status().seccomp,
        reason="needs the jail with its seccomp filter",
    ),
    pytest.mark.usefixtures("verifier_runner"),
]

FAMILIES = {
    "AF_VSOCK": 40,
    "AF_NETLINK": 16,
    "AF_PACKET": 17,
    "AF_ALG": 38,
    "AF_BLUETOOTH": 31,
    "AF_APPLETALK": 5,
    "AF_KEY": 15,
    "AF_RDS": 21,
    "AF_TIPC": 30,
    "AF_CAN": 29,
}


def test_only_the_unix_and_inet_socket_families_open(databases: dict[str, str]) -> None:
    code = (
        "import socket\n"
        f"FAMILIES = {FAMILIES!r}\n"
        "def attempt(make):\n"
        "    try:\n"
        "        make().close()\n"
        "        return 'opened'\n"
        "    except OSError as exc:\n"
        "        return exc.errno\n"
        "def verify(env):\n"
        "    out = {'score': 1}\n"
        "    for name, family in FAMILIES.items():\n"
        "        for kind in (socket.SOCK_DGRAM, socket.SOCK_RAW):\n"
        "            out[f'{name}/{kind}'] = attempt(lambda: socket.socket(family, kind))\n"
        "    out['pair AF_NETLINK'] = attempt(lambda: socket.socketpair(16, socket.SOCK_DGRAM)[0])\n"
        "    out['AF_UNIX'] = attempt(lambda: socket.socket(socket.AF_UNIX))\n"
        "    out['pair AF_UNIX'] = attempt(lambda: socket.socketpair()[0])\n"
        "    out['AF_INET'] = attempt(lambda: socket.socket(socket.AF_INET))\n"
        "    out['AF_INET6'] = attempt(lambda: socket.socket(socket.AF_INET6))\n"
        "    return out\n"
    )
    result = probes(run_without_audit_hook(code, databases))
    refused = {key: value for key, value in result.items() if key.startswith(tuple(FAMILIES))}
    assert len(refused) == 2 * len(FAMILIES)
    assert set(refused.values()) == {errno.EPERM}, refused
    assert result["pair AF_NETLINK"] == errno.EPERM
    for key in ("AF_UNIX", "pair AF_UNIX", "AF_INET", "AF_INET6"):
        assert result[key] == "opened", (key, result[key])


def test_vsock_is_refused_with_the_hook_on_too(databases: dict[str, str]) -> None:
    """The hook lets a socket object be made (asyncio needs one); the filter refuses the family."""
    code = (
        "import socket\n"
        "def verify(env):\n"
        "    try:\n"
        f"        socket.socket({FAMILIES['AF_VSOCK']}, socket.SOCK_STREAM)\n"
        "        return {'score': 1, 'vsock': 'opened'}\n"
        "    except OSError as exc:\n"
        "        return {'score': 1, 'vsock': exc.errno}\n"
    )
    assert probes(run_sandboxed_sync(code, databases=databases))["vsock"] == errno.EPERM


SYSCALLS = {
    # name: (x86_64 number, aarch64 number, arguments that succeed without the filter)
    "msgget": (68, 186, (0, 0o1600)),  # IPC_PRIVATE, IPC_CREAT | 0600
    "semget": (64, 190, (0, 1, 0o1600)),
    "shmget": (29, 194, (0, 4096, 0o1600)),
    "move_pages": (279, 239, (0, 0, 0, 0, 0, 0)),
    "modify_ldt": (154, None, (0, 0, 0)),  # read zero bytes of the LDT
}


def test_sysv_ipc_move_pages_and_modify_ldt_are_refused(databases: dict[str, str]) -> None:
    index = 0 if platform.machine() == "x86_64" else 1
    calls = {name: (numbers[index], numbers[2]) for name, numbers in SYSCALLS.items() if numbers[index]}
    code = (
        "import ctypes\n"
        f"CALLS = {calls!r}\n"
        "def verify(env):\n"
        "    libc = ctypes.CDLL(None, use_errno=True)\n"
        "    out = {'score': 1}\n"
        "    for name, (number, args) in CALLS.items():\n"
        "        ctypes.set_errno(0)\n"
        "        out[name] = [libc.syscall(number, *args), ctypes.get_errno()]\n"
        "    return out\n"
    )
    result = probes(run_without_audit_hook(code, databases))
    for name in calls:
        assert result[name] == [-1, errno.EPERM], (name, result[name])


def test_the_host_still_has_the_families_the_jail_refuses() -> None:
    """Guards the test above against passing for the wrong reason: on this machine, outside the
    jail, an ``AF_NETLINK`` socket opens."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM) as probe:
        assert probe.family == socket.AF_NETLINK
