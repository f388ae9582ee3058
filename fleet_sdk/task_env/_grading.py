"""The grading of one ``TaskEnv`` episode: its verifier, run on the platform at most once.

An episode ends in one of three places (the step that finishes it, ``reset`` abandoning it,
``close`` abandoning it), and more than one may ask for its grade: a ``close`` after the last
step, say. The ``Grader`` answers every ask after the first with the first's result, so the
platform runs each episode's verifier once. ``TaskEnv`` makes a new one for each episode.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._exceptions import FleetError

if TYPE_CHECKING:
    from .._client import AsyncFleet
    from ..env import AsyncEnv
    from ..remote_verifier import RemoteVerifierOutcome
    from ..tasks import Task

# The public module's logger, for every part of TaskEnv: it is the name users configure.
log = logging.getLogger("fleet_sdk.task_env")

_PREVIEW_LINES = 8
"""Lines of a verifier's code logged with its failure (each cut at 160 characters)."""


def _code_preview(code: str, lines: int = _PREVIEW_LINES, width: int = 160) -> str:
    """The first ``lines`` non-blank lines of ``code``, each cut at ``width`` characters, indented
    for a log line, and how many lines were left out.

    Args:
        code: The source.
        lines: Lines to keep.
        width: Characters to keep of each line.
    """
    kept = [line.rstrip() for line in code.splitlines() if line.strip()]
    shown = [line if len(line) <= width else line[: width - 3] + "..." for line in kept[:lines]]
    if len(kept) > lines:
        shown.append(f"... ({len(kept) - lines} more lines)")
    return "\n".join(f"    | {line}" for line in shown)


class Grader:
    """Grades one episode: runs the task's verifier the first time it is asked, never again.

    Attributes:
        graded: Whether grading ran (whatever came of it).
        reward: The verifier's reward (None: unknown, never 0.0 for "could not grade").
        stdout: What the verifier printed.
        error: Why the verifier failed or could not run (None when it graded).
        execution_id: The platform's id of the verifier run (None: unknown).
        outcome: The full ``RemoteVerifierOutcome`` of the run.
    """

    def __init__(self) -> None:
        self.graded = False
        self.reward: float | None = None
        self.stdout: str | None = None
        self.error: str | None = None
        self.execution_id: str | None = None
        self.outcome: RemoteVerifierOutcome | None = None

    async def grade(
        self,
        task: Task,
        fleet: Callable[[], AsyncFleet],
        *,
        instance: AsyncEnv | None,
        final_answer: Any,
        partial: bool,
        run_timeout: int,
        deadline: float,
    ) -> float | None:
        """The episode's reward: the verifier's, run on the first call; later calls return it.

        Never raises for a verifier that could not run or failed: the reward is then None and
        ``error`` says why (logged with the first lines of the code).

        Args:
            task: The task, whose ``verifier_code`` grades (None without any: no run).
            fleet: Gives the client to run the verifier on; called only when there is one to run.
            instance: The instance the episode ran on.
            final_answer: The answer submitted (None without one).
            partial: Use the partial reward of docs/wire.md#verifiers when the score is 0.0.
            run_timeout: Seconds the platform gives one verifier run.
            deadline: Overall seconds for the verifier, retries included.
        """
        if self.graded:
            return self.reward
        self.graded = True
        if not task.verifier_code:
            self.error = f"task {task.task_key!r} has no verifier_code; reward unknown"
            return None
        assert instance is not None, "an episode with a verifier is graded on its instance"
        from ..remote_verifier import run_remote
        from ..rewards import reward_from_outcome

        try:
            outcome = await run_remote(
                fleet(),
                task.verifier_code,
                key=task.task_key,
                instance_id=instance.instance_id,
                final_answer=final_answer,
                run_timeout=run_timeout,
                deadline=deadline,
            )
        except FleetError as exc:
            self.error = f"verifier could not be executed: {exc}"
            log.warning("task %s: %s\n%s", task.task_key, self.error, _code_preview(task.verifier_code))
            return None
        self.outcome = outcome
        self.stdout = outcome.stdout
        self.execution_id = outcome.execution_id
        if outcome.error is not None:
            self.error = f"{outcome.error.type}: {outcome.error.message}"
            log.warning(
                "task %s: verifier failed: %s\n%s",
                task.task_key,
                self.error,
                _code_preview(task.verifier_code),
            )
        self.reward = reward_from_outcome(outcome, partial=partial)
        return self.reward
