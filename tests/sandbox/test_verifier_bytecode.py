"""A jailed verifier run imports the sandbox's and the runtime's modules from bytecode.

Every run used to compile them afresh (their ``__pycache__`` was empty or out of the jail's
reach), about 15-20 ms of CPU per episode; now the server mounts compiled copies
(``fleet_local/sandbox/_bytecode.py``), read-only like the originals.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from _jail_runs import probes, run_without_audit_hook

from fleet_local.sandbox import _bytecode, _jail, run_sandboxed_sync

SOURCES = (Path(_jail.__file__).resolve().parent, _jail.RUNTIME_DIR)

PROBE = f"""
import os, struct

def verify(env):
    found, stale, planted = {{}}, [], []
    for inner in ({_jail.INNER_CODE_DIR!r}, {_jail.INNER_RUNTIME_DIR!r}):
        sources = sorted(n for n in os.listdir(inner) if n.endswith(".py"))
        for name in sources:
            source = os.stat(inner + "/" + name)
            cached = inner + "/__pycache__/" + name[:-3] + ".{sys.implementation.cache_tag}.pyc"
            with open(cached, "rb") as f:
                header = f.read(16)
            flags, mtime, size = struct.unpack("<III", header[4:16])
            # What the importer checks before it uses a timestamp-based pyc.
            want = (0, int(source.st_mtime) & 0xFFFFFFFF, source.st_size & 0xFFFFFFFF)
            if (flags, mtime, size) != want:
                stale.append(name)
        found[inner] = sources
        for target in (inner + "/__pycache__/_runner.{sys.implementation.cache_tag}.pyc", inner + "/x.py"):
            try:
                with open(target, "wb") as f:
                    f.write(b"planted")
                planted.append(target)
            except OSError:
                pass
    return {{"score": 1.0, "found": found, "stale": stale, "planted": planted}}
"""


def test_the_jail_sees_current_bytecode_for_every_module_and_cannot_change_it() -> None:
    result = probes(run_without_audit_hook(PROBE, {}))
    assert "_runner.py" in result["found"][_jail.INNER_CODE_DIR]
    assert "_entry.py" in result["found"][_jail.INNER_RUNTIME_DIR]
    assert result["stale"] == []
    assert result["planted"] == []  # nothing a run writes there reaches the next run


def test_the_copies_are_this_users_alone_and_made_once_per_process() -> None:
    first = _bytecode.staged(*SOURCES)
    assert first == _bytecode.staged(*SOURCES)
    assert first != SOURCES
    root = first[0].parent
    assert root.name.startswith(_bytecode.PREFIX)
    mode = root.stat()
    assert mode.st_uid == os.geteuid() and stat.S_IMODE(mode.st_mode) == 0o700
    for source, copy in zip(SOURCES, first, strict=True):
        assert sorted(p.name for p in copy.glob("*.py")) == sorted(p.name for p in source.glob("*.py"))


def test_copies_removed_under_a_running_server_are_made_again() -> None:
    """A temporary-file cleaner (systemd-tmpfiles, tmpreaper) may delete them while a
    long-running server still mounts them: the next run must not fail for it."""
    first = _bytecode.staged(*SOURCES)
    (first[1] / "_entry.py").unlink()
    outcome = run_sandboxed_sync("def verify(env):\n    return 1.0\n", databases={})
    assert outcome.success and outcome.score == 1.0, outcome.error
    again = _bytecode.staged(*SOURCES)
    assert (again[1] / "_entry.py").exists()
    assert again[0].parent != first[0].parent and not first[0].parent.exists()


def test_without_a_writable_temp_dir_runs_mount_the_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_bytecode, "_copies", {})
    monkeypatch.setattr(tempfile, "tempdir", "/nonexistent-fleet-verifier-tmp")
    assert _bytecode.staged(*SOURCES) == SOURCES
    outcome = run_sandboxed_sync("def verify(env):\n    return 1.0\n", databases={})
    assert outcome.success and outcome.score == 1.0, outcome.error


STAGE = """
import os, sys
from pathlib import Path
from fleet_local.sandbox import _bytecode, _jail
copies = _bytecode.staged(Path(_jail.__file__).resolve().parent, _jail.RUNTIME_DIR)
print(copies[0].parent, flush=True)
if sys.argv[1] == "killed":
    os._exit(0)  # no atexit: as a SIGKILLed server leaves it
sys.stdin.read()  # alive until the test closes stdin
"""


def _stage_in_child(tmp: Path, how: str) -> tuple[subprocess.Popen[str], Path]:
    child = subprocess.Popen(
        [sys.executable, "-c", STAGE, how],
        env={**os.environ, "TMPDIR": str(tmp)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    return child, Path(child.stdout.readline().strip())


def test_a_killed_servers_copies_go_with_the_next_one_and_a_live_ones_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    killed, left = _stage_in_child(tmp_path, "killed")
    killed.wait()
    alive, kept = _stage_in_child(tmp_path, "alive")
    try:
        assert left.is_dir() is False  # the second process's copy removed the first's
        assert kept.is_dir()
        monkeypatch.setattr(_bytecode, "_copies", {})
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        mine = _bytecode.staged(*SOURCES)[0].parent
        assert kept.is_dir()  # its owner lives: never removed under it
        assert mine.parent == tmp_path and mine != kept
    finally:
        assert alive.stdin is not None
        alive.stdin.close()
        alive.wait()
    assert not kept.exists()  # removed by its owner at exit
