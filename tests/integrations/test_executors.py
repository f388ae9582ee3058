"""The framework-free executor parts: AsyncioExecutor against the local server, the JSONL sink's
exactly-once and resume rules, failed episodes as results; and `import fleet_sdk` stays light."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from fleet_local import LocalFleet
from fleet_sdk.executors import (
    AsyncioExecutor,
    EpisodeResult,
    EpisodeSpec,
    JsonlResultSink,
    collect,
    specs_for,
)
from fleet_sdk.policies import PolicyContext, PolicyTurn


class RaisingPolicy:
    """A policy that fails on its first turn (module-level, as executors need)."""

    def __init__(self, context: PolicyContext) -> None:
        self.context = context

    async def next_turn(self, messages: Sequence[Mapping[str, Any]]) -> PolicyTurn:
        raise RuntimeError("policy blew up")

    async def aclose(self) -> None:
        pass


def result(episode_id: str) -> EpisodeResult:
    return EpisodeResult(episode_id, "t", 1.0, "agent", 1, [], None, "v-1")


async def test_asyncio_executor_streams_persists_and_resumes(local: LocalFleet, tmp_path: Path) -> None:
    fleet = local.async_fleet()
    tasks = [(await fleet.tasks.get("orderdesk-count-pending-orders")).model_dump(mode="json")]
    specs = [*specs_for(tasks, repeats=5, max_steps=5), EpisodeSpec("boom", tasks[0], RaisingPolicy)]
    sink = JsonlResultSink(tmp_path / "r.jsonl")
    try:
        first = [r async for r in AsyncioExecutor(fleet, concurrency=3).run(specs[:4], sink)]
        assert sorted(r.episode_id for r in first) == sorted(s.episode_id for s in specs[:4])
        assert all(r.reward == 1.0 and r.done_reason == "submitted" and r.steps == 2 for r in first)
        assert all(r.verifier_execution_id for r in first)

        # A rerun with more specs runs only the new ones; the failing policy is a result, not a raise.
        second = await collect(AsyncioExecutor(fleet, concurrency=3).run(specs, sink))
        assert sorted(r.episode_id for r in second) == sorted(s.episode_id for s in specs[4:])
        boom = next(r for r in second if r.episode_id == "boom")
        assert boom.reward is None and boom.error == "RuntimeError: policy blew up"
    finally:
        await fleet.close()
    assert sorted(r.episode_id for r in sink.read()) == sorted(s.episode_id for s in specs)


def test_sink_refuses_a_recorded_id_and_survives_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    sink = JsonlResultSink(path)
    assert sink.write(result("a")) is True
    assert sink.write(result("a")) is False
    with path.open("a") as file:
        file.write('{"episode_id": "b", "task')  # a crash mid-write
    reopened = JsonlResultSink(path)
    assert reopened.recorded() == {"a"} and [r.episode_id for r in reopened.read()] == ["a"]
    assert EpisodeResult.from_json(result("z").to_json()) == result("z")


async def test_duplicate_ids_are_refused_before_anything_runs(local: LocalFleet) -> None:
    spec = EpisodeSpec("same", {"task_key": "t", "prompt": "p", "env_key": "orderdesk"})
    fleet = local.async_fleet()
    try:
        with pytest.raises(ValueError, match="'same' appears twice"):
            await collect(AsyncioExecutor(fleet).run([spec, spec]))
    finally:
        await fleet.close()


def test_import_fleet_sdk_loads_no_framework() -> None:
    code = (
        "import sys, fleet_sdk, fleet_sdk.executors, fleet_sdk.integrations\n"
        "import fleet_sdk.integrations.text_actions\n"
        "print(sorted(m for m in ('ray', 'openenv', 'skyrl_gym', 'gradio', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"
