"""On a terminal, a warning while ``fleet-sdk eval`` draws its progress bar (a model request being
retried) is written on a line of its own, in the command's words, naming no private class.

``eval`` runs in a real subprocess on a pseudo-terminal (its bar then redraws one line with
``\\r``), against a fake chat-completions endpoint that answers 500 for one task.
"""

from __future__ import annotations

import os
import pty
import subprocess
from pathlib import Path

from _cli import CLI
from _fake_model import reference_model, serve_model

from fleet_sdk.tasks import Task


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def test_a_retry_warning_is_not_glued_onto_the_progress_line(
    tmp_path: Path, bundled_tasks: list[Task]
) -> None:
    """Regression: `[###...] 1/2 episodes ... ETA 3smodel endpoint ... failed (_ModelReplyError:
    HTTP 500 ...); retry 1/2 in 1.0s`, the warning glued onto the bar and naming a private class."""
    tasks = [t for t in bundled_tasks if t.env_key == "orderdesk" and t.task_modality == "tool_use"][:2]
    handler = reference_model(tasks, failing=[tasks[1].task_key])
    env = {**os.environ, "FLEET_EVAL_MODEL_API_KEY": "sk-warnings", "COLUMNS": "200"}
    with serve_model(handler) as url:
        argv = [*CLI, "eval", "--model", "fake-gpt", "--model-base-url", url, "--concurrency", "1"]
        argv += ["--out-dir", str(tmp_path / "run")] + [a for t in tasks for a in ("--task-key", t.task_key)]
        main, child = pty.openpty()
        try:
            run = subprocess.Popen(argv, cwd=tmp_path, env=env, stdin=child, stdout=child, stderr=child)
            os.close(child)
            output = _read_all(main).decode("utf-8", errors="replace")
            code = run.wait(timeout=300)
        finally:
            os.close(main)
    assert code == 3, output
    assert "Traceback" not in output
    assert "_ModelReplyError" not in output
    warned = [line for line in output.replace("\r\n", "\n").split("\n") if "retry 1/2" in line]
    assert warned, output
    for line in warned:
        assert line.startswith("fleet-sdk eval: warning: model endpoint "), repr(line)
        assert "failed (HTTP 500: " in line
    assert "episodes  pass rate" in output  # the bar was drawn, and went on after the warnings
