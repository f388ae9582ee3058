"""``fleet-sdk serve`` as a user starts it: a real subprocess, read until its ready line."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _waits import PATIENCE

__all__ = ["serving"]


@contextmanager
def serving(tmp_path: Path, *args: str) -> Iterator[tuple[dict[str, Any], Path]]:
    """``fleet-sdk serve`` until its ready line: (the ready line, the file its stderr goes to)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "BROWSER_API"))}
    argv = [sys.executable, "-m", "fleet_sdk.cli", "serve", "--port", "0", "--no-s3"]
    argv += ["--data-dir", str(tmp_path / "data"), *args]
    stderr_path = tmp_path / "stderr.txt"
    with stderr_path.open("w") as stderr:
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
    assert process.stdout is not None
    try:
        lines: queue.Queue[str] = queue.Queue()
        stdout = process.stdout
        threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
        line = lines.get(timeout=PATIENCE)  # the ready line is the first stdout line
        ready = json.loads(line)
        assert ready.get("event") == "ready", line
        yield ready, stderr_path
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=PATIENCE)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()
