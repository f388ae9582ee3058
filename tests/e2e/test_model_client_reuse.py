"""A chat-completions model's episodes share one HTTP client for the whole evaluation: its
connections are reused from episode to episode, and closed when the run ends."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from _fake_model import reference_model, serve_model

from fleet_sdk import AsyncFleet
from fleet_sdk.evaluation import ModelEndpoint, run_evaluation
from fleet_sdk.policies import ChatCompletionsFactory, PolicyContext, make_policy
from fleet_sdk.tasks import Task


async def test_an_evaluation_reuses_one_model_connection_for_all_its_episodes(
    afleet: AsyncFleet, bundled_tasks: list[Task], tmp_path: Path
) -> None:
    """Regression: ``ChatCompletionsPolicy`` opened a new HTTP client per episode, so none of the
    thousands of model calls of an evaluation reused a connection."""
    tasks = [t for t in bundled_tasks if t.env_key == "orderdesk"][:2]
    base = reference_model(tasks)
    opened: list[str] = []

    def setup(self: Any) -> None:  # once per TCP connection the fake model accepts
        opened.append(str(self.client_address))
        base.setup(self)

    counting: Any = type("Counting", (base,), {"protocol_version": "HTTP/1.1", "setup": setup})
    with serve_model(counting) as url:
        envelope = await run_evaluation(
            afleet,
            tmp_path / "run",
            tasks=tasks,
            models=["my-model"],
            k=2,
            concurrency=1,
            upload=False,
            model_endpoint=ModelEndpoint(url),
        )
        requests = len(counting.requests)
    assert [r.status for r in envelope.report.results] == ["passed"] * 4
    assert requests > 8  # the probe, then a few turns per episode
    # One connection for the probe before the run, one for all four episodes (one at a time).
    assert len(opened) == 2, opened


async def test_the_factory_shares_its_client_closes_it_and_pickles_without_it() -> None:
    endpoint = ModelEndpoint("http://127.0.0.1:9/v1", api_key="sk-secret")
    context = PolicyContext("e", Task(task_key="t", prompt="p", env_key="orderdesk"), (), 3)
    own = make_policy("my-model", endpoint)(context)  # not shared: the episode closes its client
    assert own._owns_client
    await own.aclose()
    assert own._client.is_closed
    factory = make_policy("my-model", endpoint, shared=True)
    assert isinstance(factory, ChatCompletionsFactory)
    first, second = factory(context), factory(context)
    assert first._client is second._client and not first._owns_client
    await first.aclose()  # an episode's policy never closes the shared client
    assert not second._client.is_closed
    copy = pickle.loads(pickle.dumps(factory))  # shipped to another process: holds nothing open
    assert copy._client is None and not copy.shared and copy.endpoint == factory.endpoint
    await factory.aclose()
    assert second._client.is_closed
