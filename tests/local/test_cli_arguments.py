"""``fleet-sdk serve`` and ``demo`` as a newcomer mistypes them: one line, exit 2, no traceback.

Each case was a rough edge of the first day: an ``OverflowError`` traceback for a port out of
range, a negative verifier timeout or zero job concurrency that started a server anyway, an
empty ``--api-key`` silently replaced by a generated one, a misspelt flag answered with the
top-level usage and no did-you-mean, ``File exists`` for a data dir that is a file, a demo that
hung forever at 0/N with ``--concurrency 0`` or ended in a traceback with ``--limit 0`` and
``--random-episodes -1``; and help texts that said ``(default: None)``, ``(default: False)``
or a default twice.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _cli import CLI, run_cli
from _waits import PATIENCE

CASES = [
    (
        ("serve", "--port", "70000"),
        "fleet-sdk serve: error: argument --port: must be from 0 to 65535, not 70000",
    ),
    (("serve", "--port", "-1"), "fleet-sdk serve: error: argument --port: must be from 0 to 65535, not -1"),
    (
        ("serve", "--verifier-timeout", "-1"),
        "fleet-sdk serve: error: argument --verifier-timeout: must be a positive number of seconds, not -1",
    ),
    (
        ("serve", "--job-concurrency", "0"),
        "fleet-sdk serve: error: argument --job-concurrency: must be at least 1, not 0",
    ),
    (
        ("serve", "--api-key", ""),
        "fleet-sdk serve: error: argument --api-key: must not be empty (leave the flag out to have one "
        "generated)",
    ),
    (
        ("serve", "--prot", "18421"),
        "fleet-sdk serve: error: unrecognized argument --prot (did you mean --port?)",
    ),
    (
        ("demo", "--concurrency", "0"),
        "fleet-sdk demo: error: argument --concurrency: must be at least 1, not 0",
    ),
    (("demo", "--limit", "0"), "fleet-sdk demo: error: argument --limit: must be at least 1, not 0"),
    (
        ("demo", "--random-episodes", "-1"),
        "fleet-sdk demo: error: argument --random-episodes: must be at least 0, not -1",
    ),
    (
        ("demo", "--concurency", "2"),
        "fleet-sdk demo: error: unrecognized argument --concurency (did you mean --concurrency?)",
    ),
]


@pytest.mark.parametrize(("args", "message"), CASES, ids=[" ".join(args) for args, _ in CASES])
def test_a_bad_argument_is_one_line_and_exit_2(args: tuple[str, ...], message: str) -> None:
    done = run_cli(*args, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(message), lines[0]


def test_a_data_dir_that_is_a_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """Regression: it said ``[Errno 17] File exists``."""
    a_file = tmp_path / "data"
    a_file.write_text("")
    done = run_cli("serve", "--port", "0", "--data-dir", str(a_file), timeout=60)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"fleet-sdk serve: error: --data-dir {a_file}: not a directory"]


@pytest.mark.parametrize("command", ["serve", "demo"])
def test_every_flag_shows_its_real_default_once(command: str) -> None:
    done = run_cli(command, "--help", timeout=60, check=True)
    text = " ".join(done.stdout.split())
    assert "(default: None)" not in text and "(default: False)" not in text
    if command == "serve":
        assert "(default: 8765)" in text and "(default: 30.0)" in text
        assert "server-wide (default: 4 per core, 1 per 2 GB of RAM) --model-base-url" in text
    else:
        assert "Start an embedded local server" in text  # demo has a description now
        assert "(default: ./fleet-demo)" in text and "(default: every task)" in text


def test_the_server_package_runs_the_same_commands_without_the_entry_point() -> None:
    """``LocalFleet`` starts ``python -m fleet_local serve``: the same parser, the same messages."""
    done = subprocess.run(
        [sys.executable, "-m", "fleet_local", "serve", "--port", "70000"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("fleet-sdk serve: error: argument --port: must be from 0 to 65535")


def test_ctrl_c_stops_the_demo_with_one_line_and_exit_130(tmp_path: Path) -> None:
    """Regression: Ctrl-C printed two tracebacks after a retry warning."""
    process = subprocess.Popen(
        [*CLI, "demo", "--out-dir", str(tmp_path / "demo"), "--random-episodes", "0"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:  # the episodes have started
            if "episodes" in line:
                break
        os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends: the whole group
        _, stderr = process.communicate(timeout=PATIENCE)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr, stderr
    assert stderr.splitlines()[-1] == "fleet-sdk demo: stopped (Ctrl-C)"
