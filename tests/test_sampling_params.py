"""Sampling parameters of a chat-completions model: checked when made, sent with every request."""

from __future__ import annotations

import json

import httpx
import pytest

from fleet_sdk.policies import ChatCompletionsPolicy, ModelEndpoint, PolicyContext, SamplingParams
from fleet_sdk.tasks import Task
from fleet_sdk.tools import Tool


def test_set_parameters_are_sent_and_recorded_unset_ones_are_not() -> None:
    sampling = SamplingParams(temperature=0.0, seed=7, extra_body={"top_k": 20})
    assert sampling.request_fields() == {"temperature": 0.0, "seed": 7, "top_k": 20}
    assert sampling.to_dict() == {"temperature": 0.0, "seed": 7, "extra_body": {"top_k": 20}}
    assert SamplingParams.from_dict(sampling.to_dict()) == sampling
    assert SamplingParams().request_fields() == {} and SamplingParams().to_dict() == {}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"temperature": -0.1}, "temperature must be at least 0"),
        ({"max_tokens": 0}, "max_tokens must be at least 1"),
        ({"top_p": 0.0}, r"top_p must be in \(0, 1\]"),
        ({"top_p": 1.5}, r"top_p must be in \(0, 1\]"),
        ({"extra_body": {"messages": []}}, "extra_body may not set 'messages'"),
        ({"seed": 1, "extra_body": {"seed": 2}}, "extra_body may not set 'seed'"),
    ],
)
def test_bad_parameters_are_refused_naming_the_field(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SamplingParams(**fields)  # type: ignore[arg-type]


async def test_the_chat_completions_request_carries_the_sampling_parameters() -> None:
    """Regression: the request carried only messages, model, tool_choice and tools, so pass@k with
    k > 1 depended on a server default the report did not record."""
    bodies: list[dict[str, object]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json={"choices": [{"message": {"role": "assistant", "content": "done"}}]})

    tool = Tool(name="t", description="", input_schema={"type": "object"})
    context = PolicyContext("s", Task(task_key="t", prompt="p", env_key="e"), (tool,), 3)
    sampling = SamplingParams(temperature=0.2, max_tokens=64, top_p=0.9, seed=3, extra_body={"top_k": 5})
    policy = ChatCompletionsPolicy(
        context, model="m", endpoint=ModelEndpoint("http://model.test/v1", None, sampling)
    )
    policy._client = httpx.AsyncClient(transport=httpx.MockTransport(answer))

    try:
        await policy.next_turn([{"role": "user", "content": "hi"}])
    finally:
        await policy.aclose()
    (body,) = bodies
    assert {k: body[k] for k in ("temperature", "max_tokens", "top_p", "seed", "top_k")} == {
        "temperature": 0.2,
        "max_tokens": 64,
        "top_p": 0.9,
        "seed": 3,
        "top_k": 5,
    }
    assert body["model"] == "m" and body["tool_choice"] == "auto"
