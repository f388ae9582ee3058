"""Policies: what picks an episode's next turn. A scripted one, a random one, and any
chat-completions model.

A policy plays one episode: ``fleet_sdk.episodes.play_episode`` makes it from the episode's
``PolicyContext`` once the env is reset, asks it for each turn (``next_turn(messages)``, the chat
history so far), runs the tool calls of the turn as one ``TaskEnv`` step, and closes it
(``aclose``). What a caller hands ``play_episode`` is therefore a ``PolicyFactory``, a callable
from the context to the policy: a policy class is one itself (``ScriptedPolicy``), and so is
``make_policy(model)``'s answer. Executors that play episodes in other processes (Ray) pickle the
factory with the episode, so it is a class, a module-level function or a small object, never a
closure over a live client.

Models are named by ``provider/model`` ids (docs/wire.md#instances). ``make_policy`` knows:

* ``local/scripted`` - plays the task's ``metadata.reference_solution`` step by step; a
  ``submit_final_answer`` step carries the final answer. It should pass every bundled task.
* ``local/random`` - a few random tool calls whose arguments are generated from each tool's
  ``input_schema`` (valid by the schema, usually wrong for the task), seeded by the episode's
  id so an episode replays identically. It exercises the pipeline and scores low.
* anything else - an OpenAI-compatible chat-completions model at a ``ModelEndpoint``
  (``POST {base_url}/chat/completions`` with the tools in OpenAI format, and the endpoint's
  ``SamplingParams``). Without an endpoint ``make_policy`` refuses it: ``PolicyError`` says so.
  ``probe_endpoint`` asks it one small question, to find a wrong URL or key before a run starts.

A policy only decides; ``play_episode`` executes its tool calls and ``TaskEnv`` records the
transcript.
"""

from __future__ import annotations

import json
import logging
import random
import string
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from ._exceptions import PolicyError
from ._retry import Deadline, RetryPolicy, call_with_retries, is_transient, is_transient_reply
from .protocol import SUBMIT_FINAL_ANSWER
from .tasks import Task
from .tools import Tool

__all__ = [
    "LOCAL_MODELS",
    "RANDOM_MODEL",
    "SCRIPTED_MODEL",
    "SUBMIT_FINAL_ANSWER",
    "ChatCompletionsFactory",
    "ChatCompletionsPolicy",
    "ModelEndpoint",
    "Policy",
    "PolicyContext",
    "PolicyError",
    "PolicyFactory",
    "PolicyTurn",
    "RandomPolicy",
    "SamplingParams",
    "ScriptedPolicy",
    "ToolCallRequest",
    "close_policy_factory",
    "make_policy",
    "probe_endpoint",
    "random_value",
]

log = logging.getLogger("fleet_sdk.policies")

SCRIPTED_MODEL = "local/scripted"
RANDOM_MODEL = "local/random"
LOCAL_MODELS = (SCRIPTED_MODEL, RANDOM_MODEL)
"""The models ``make_policy`` plays without an endpoint."""

_MODEL_RETRY = RetryPolicy(max_retries=2, backoff_base=1.0, backoff_max=4.0)
"""Retries of one model request on transient failures (``fleet_sdk._retry``)."""


class _ModelReplyError(Exception):
    """An error reply of the model endpoint, for the retry loop to classify."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"HTTP {response.status_code}: {response.text[:300]}")
        self.response = response
        self.status_code = response.status_code
        try:
            self.body: Any = response.json()
        except ValueError:
            self.body = response.text


_RESERVED_BODY_FIELDS = frozenset({"model", "messages", "tools", "tool_choice"})
"""Request fields the policy writes itself; an extra body may not replace them."""


@dataclass(frozen=True)
class SamplingParams:
    """How a chat-completions model samples: sent with every request, recorded in a run and report.

    None leaves a parameter to the endpoint's default. ``extra_body`` carries any other request
    field the endpoint knows (``{"top_k": 20}``, ``{"reasoning_effort": "low"}``); it may not name
    a field set here or one the policy writes (``model``, ``messages``, ``tools``, ``tool_choice``).

    Attributes:
        temperature: Sampling temperature, at least 0.
        max_tokens: Most tokens per reply, at least 1.
        top_p: Nucleus sampling mass, in (0, 1].
        seed: The endpoint's sampling seed, where it supports one.
        extra_body: More request fields, merged into the body as given.

    Raises:
        ValueError: A parameter out of range, or an extra body field that clashes (naming it).
    """

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    seed: int | None = None
    extra_body: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.temperature is not None and not self.temperature >= 0:
            raise ValueError(f"temperature must be at least 0, got {self.temperature}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        named = {name for name, value in self._named().items() if value is not None}
        for key in self.extra_body or {}:
            if key in _RESERVED_BODY_FIELDS or key in named:
                raise ValueError(f"extra_body may not set {key!r}: it is set elsewhere")

    def _named(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "top_p": self.top_p,
            "seed": self.seed,
        }

    def request_fields(self) -> dict[str, Any]:
        """The fields these parameters add to a chat-completions request body."""
        fields = {name: value for name, value in self._named().items() if value is not None}
        return {**dict(self.extra_body or {}), **fields}

    def to_dict(self) -> dict[str, Any]:
        """The parameters that are set, as JSON data (what a run and a report record)."""
        data = {name: value for name, value in self._named().items() if value is not None}
        if self.extra_body:
            data["extra_body"] = dict(self.extra_body)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> SamplingParams:
        """The parameters :meth:`to_dict` wrote."""
        return cls(**dict(data or {}))


@dataclass(frozen=True)
class ModelEndpoint:
    """An OpenAI-compatible chat-completions endpoint for models other than the bundled policies.

    Attributes:
        base_url: e.g. ``http://127.0.0.1:8000/v1`` (``/chat/completions`` is appended).
        api_key: Bearer key; never shown by ``repr``, never written to a run directory or report.
        sampling: The sampling parameters sent with every request.
    """

    base_url: str
    api_key: str | None = None
    sampling: SamplingParams = field(default_factory=SamplingParams)

    def __repr__(self) -> str:
        return (
            f"ModelEndpoint(base_url={self.base_url!r}, api_key={'***' if self.api_key else None}, "
            f"sampling={self.sampling!r})"
        )


@dataclass(frozen=True)
class ToolCallRequest:
    """One tool call a policy wants made.

    Attributes:
        id: Tool call id; the answering ``tool`` message carries it as ``tool_call_id``.
        name: Tool name (an environment tool or ``submit_final_answer``).
        arguments: Parsed arguments, or None when the model sent arguments that are not a JSON object.
        arguments_json: Arguments as the JSON string recorded in the transcript.
    """

    id: str
    name: str
    arguments: dict[str, Any] | None
    arguments_json: str

    @classmethod
    def create(cls, name: str, arguments: Mapping[str, Any], call_id: str | None = None) -> ToolCallRequest:
        """A call with fresh id (unless given) and its arguments serialised."""
        return cls(
            id=call_id or f"call_{uuid.uuid4().hex[:24]}",
            name=name,
            arguments=dict(arguments),
            arguments_json=json.dumps(dict(arguments)),
        )

    def openai(self) -> dict[str, Any]:
        """The call in OpenAI ``tool_calls`` shape."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments_json},
        }


@dataclass(frozen=True)
class PolicyTurn:
    """One assistant turn: optional text and the tool calls to make (none ends the episode)."""

    content: str | None = None
    tool_calls: tuple[ToolCallRequest, ...] = ()


@dataclass(frozen=True)
class PolicyContext:
    """What a policy knows about its episode, once the env is reset.

    Attributes:
        episode_id: The episode's id; seeds the random policy, so an episode replays identically.
        task: The task.
        tools: The tools ``TaskEnv`` offers, ``submit_final_answer`` and the context tools
            included when offered.
        max_steps: The step budget.
    """

    episode_id: str
    task: Task
    tools: tuple[Tool, ...]
    max_steps: int

    @property
    def offer_submit(self) -> bool:
        """Whether ``submit_final_answer`` is offered (the prompt asks for an answer)."""
        return any(tool.name == SUBMIT_FINAL_ANSWER for tool in self.tools)

    @property
    def openai_tools(self) -> list[dict[str, Any]]:
        """The tools in OpenAI format, as a chat-completions request takes them."""
        return [tool.to_openai() for tool in self.tools]


class Policy(Protocol):
    """Plays one episode: decides the next assistant turn from the chat history so far."""

    async def next_turn(self, messages: Sequence[Mapping[str, Any]]) -> PolicyTurn:
        """The next turn; a turn without tool calls ends the episode.

        Args:
            messages: The chat history in OpenAI shape (the system prompt first, when there is one).
        """
        ...

    async def aclose(self) -> None:
        """Release resources (HTTP clients)."""
        ...


PolicyFactory = Callable[[PolicyContext], Policy]
"""Makes an episode's policy from its context: a policy class, or what ``make_policy`` returns.

Executors in other processes pickle it (a class, a module-level function, a ``functools.partial``).
"""


class ScriptedPolicy:
    """Plays the task's reference solution, one step per turn, then stops.

    Args:
        context: The episode (its task's ``metadata.reference_solution`` is the script).

    Raises:
        PolicyError: The task has no reference solution.
    """

    def __init__(self, context: PolicyContext) -> None:
        steps = context.task.metadata.get("reference_solution")
        if not isinstance(steps, list) or not steps:
            raise PolicyError(f"task {context.task.task_key!r} has no metadata.reference_solution to script")
        self._steps: list[Mapping[str, Any]] = [s for s in steps if isinstance(s, Mapping)]
        self._next = 0

    async def next_turn(self, messages: Sequence[Mapping[str, Any]]) -> PolicyTurn:
        """The next reference step as one tool call; an empty turn once the script is done."""
        if self._next >= len(self._steps):
            return PolicyTurn(content="Done.")
        step = self._steps[self._next]
        self._next += 1
        params = step.get("params") or {}
        return PolicyTurn(tool_calls=(ToolCallRequest.create(str(step.get("tool")), dict(params)),))

    async def aclose(self) -> None:
        """Nothing to release."""


class RandomPolicy:
    """A few random, schema-valid tool calls, seeded by the episode id; never submits an answer.

    Args:
        context: The episode (its id seeds the choices, so an id replays identically).

    Raises:
        PolicyError: The environment offers no tool to call.
    """

    def __init__(self, context: PolicyContext) -> None:
        self._tools = [tool for tool in context.tools if tool.name != SUBMIT_FINAL_ANSWER]
        if not self._tools:
            raise PolicyError("the environment has no tools to call")
        self._rng = random.Random(f"local/random:{context.episode_id}")
        self._remaining = min(self._rng.randint(2, 4), context.max_steps)

    async def next_turn(self, messages: Sequence[Mapping[str, Any]]) -> PolicyTurn:
        """One random tool call, or an empty turn once its few steps are spent."""
        if self._remaining <= 0:
            return PolicyTurn(content="I am done exploring.")
        self._remaining -= 1
        tool = self._rng.choice(self._tools)
        arguments = random_value(self._rng, tool.input_schema or {"type": "object"})
        if not isinstance(arguments, dict):
            arguments = {}
        return PolicyTurn(tool_calls=(ToolCallRequest.create(tool.name, arguments),))

    async def aclose(self) -> None:
        """Nothing to release."""


def random_value(rng: random.Random, schema: Mapping[str, Any], depth: int = 0) -> Any:
    """A random value valid for the subset of JSON Schema the bundled tools use."""
    if schema.get("enum"):
        return rng.choice(list(schema["enum"]))
    declared = schema.get("type", "string")
    kind = (
        rng.choice([t for t in declared if t != "null"] or ["null"])
        if isinstance(declared, list)
        else declared
    )
    if kind == "object":
        properties: Mapping[str, Any] = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        return {
            name: random_value(rng, sub, depth + 1)
            for name, sub in properties.items()
            if name in required or (depth < 2 and rng.random() < 0.4)
        }
    if kind == "array":
        low = int(schema.get("minItems", 0))
        high = max(low, min(int(schema.get("maxItems", low + 2)), low + 2))
        items = schema.get("items") or {"type": "string"}
        return [random_value(rng, items, depth + 1) for _ in range(rng.randint(low, high))]
    if kind in ("integer", "number"):
        low_num = int(schema.get("minimum", 0))
        high_num = int(schema.get("maximum", low_num + 50))
        value = rng.randint(low_num, max(low_num, high_num))
        return value if kind == "integer" else float(value)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    low_len = max(1, int(schema.get("minLength", 1)))
    high_len = max(low_len, min(int(schema.get("maxLength", 12)), 12))
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(low_len, high_len)))


def _model_client(endpoint: ModelEndpoint, timeout: float) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
    return httpx.AsyncClient(timeout=timeout, headers=headers)


class ChatCompletionsPolicy:
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint, with tools.

    Args:
        context: The episode.
        model: The model id sent as ``model`` (e.g. ``openai/gpt-4o``).
        endpoint: The endpoint (``/chat/completions`` is appended to its URL unless present).
        timeout: Seconds per HTTP attempt.
        http_client: The client to send on, shared by the episodes of a run and owned by the
            caller (``ChatCompletionsFactory``); None makes one for this episode, closed by ``aclose``.
    """

    def __init__(
        self,
        context: PolicyContext,
        *,
        model: str,
        endpoint: ModelEndpoint,
        timeout: float = 120.0,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        base = endpoint.base_url.rstrip("/")
        self._url = base if base.endswith("/chat/completions") else f"{base}/chat/completions"
        self._model = model
        self._tools = context.openai_tools
        self._sampling = endpoint.sampling
        self._timeout = timeout
        self._owns_client = http_client is None
        self._client = http_client or _model_client(endpoint, timeout)

    async def next_turn(self, messages: Sequence[Mapping[str, Any]]) -> PolicyTurn:
        """Ask the model; transient HTTP failures are retried a couple of times with backoff."""
        payload: dict[str, Any] = {
            **self._sampling.request_fields(),
            "model": self._model,
            "messages": [dict(m) for m in messages],
        }
        if self._tools:
            payload["tools"] = self._tools
            payload["tool_choice"] = "auto"
        data = await self._post(payload)
        try:
            message = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError) as exc:
            raise PolicyError(
                f"model endpoint answered without choices[0].message: {str(data)[:300]}"
            ) from exc
        calls: list[ToolCallRequest] = []
        for raw in message.get("tool_calls") or []:
            function = raw.get("function") or {}
            arguments_json = function.get("arguments")
            if not isinstance(arguments_json, str):
                arguments_json = json.dumps(arguments_json or {})
            try:
                parsed = json.loads(arguments_json or "{}")
            except json.JSONDecodeError:
                parsed = None
            calls.append(
                ToolCallRequest(
                    id=str(raw.get("id") or f"call_{uuid.uuid4().hex[:24]}"),
                    name=str(function.get("name") or ""),
                    arguments=parsed if isinstance(parsed, dict) else None,
                    arguments_json=arguments_json,
                )
            )
        content = message.get("content")
        return PolicyTurn(content=content if isinstance(content, str) else None, tool_calls=tuple(calls))

    async def _post(self, payload: dict[str, Any]) -> Any:
        async def attempt() -> httpx.Response:
            response = await self._client.post(self._url, json=payload)
            if response.status_code >= 400:
                raise _ModelReplyError(response)
            return response

        def transient(exc: BaseException) -> bool:
            # A chat completion does nothing twice, so every 5xx is worth another try too.
            if isinstance(exc, _ModelReplyError):
                return is_transient_reply(exc.status_code, exc.body, server_errors=True)
            return is_transient(exc)

        try:
            response = await call_with_retries(
                attempt,
                what=f"model endpoint {self._url}",
                policy=_MODEL_RETRY,
                deadline=Deadline(self._timeout * (_MODEL_RETRY.max_retries + 1) + 30.0),
                log=log,
                transient=transient,
            )
        except _ModelReplyError as exc:
            raise PolicyError(
                f"model endpoint {self._url} answered {exc.status_code}: {exc.response.text[:300]}"
            ) from exc
        except httpx.TransportError as exc:
            raise PolicyError(f"model endpoint {self._url} failed: {type(exc).__name__}: {exc}") from exc
        try:
            return response.json()
        except ValueError as exc:
            raise PolicyError(f"model endpoint {self._url} answered non-JSON: {response.text[:300]}") from exc

    async def aclose(self) -> None:
        """Close the HTTP client, when this policy made it."""
        if self._owns_client:
            await self._client.aclose()


class ChatCompletionsFactory:
    """Makes the ``ChatCompletionsPolicy`` of each episode of a model.

    With ``shared``, its policies all send on one HTTP client, so an evaluation's thousands of
    model calls reuse their connections; whoever asks for that closes the client at the end of
    the run (``close_policy_factory``). The client is made on first use and belongs to that event
    loop: a policy made on another loop gets a client of its own. A pickled copy (an executor
    shipping it to another process) is not shared, so nothing there is left open. Without
    ``shared`` each policy has its own client, closed with the episode.

    Args:
        model: The model id sent as ``model``.
        endpoint: The endpoint.
        timeout: Seconds per HTTP attempt.
        shared: One HTTP client for every policy, until ``aclose``.
    """

    def __init__(
        self, model: str, endpoint: ModelEndpoint, timeout: float = 120.0, *, shared: bool = False
    ) -> None:
        self.model = model
        self.endpoint = endpoint
        self.timeout = timeout
        self.shared = shared
        self._client: httpx.AsyncClient | None = None
        self._loop: object = None

    def __repr__(self) -> str:
        return f"ChatCompletionsFactory(model={self.model!r}, endpoint={self.endpoint!r})"

    def __call__(self, context: PolicyContext) -> ChatCompletionsPolicy:
        import asyncio

        client = None
        if self.shared:
            loop = asyncio.get_running_loop()
            if self._client is None or self._client.is_closed:
                self._client, self._loop = _model_client(self.endpoint, self.timeout), loop
            client = self._client if self._loop is loop else None
        return ChatCompletionsPolicy(
            context, model=self.model, endpoint=self.endpoint, timeout=self.timeout, http_client=client
        )

    async def aclose(self) -> None:
        """Close the shared HTTP client; later policies have clients of their own."""
        client, self._client, self._loop, self.shared = self._client, None, None, False
        if client is not None:
            await client.aclose()

    def __getstate__(self) -> dict[str, Any]:
        return {"model": self.model, "endpoint": self.endpoint, "timeout": self.timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]


async def close_policy_factory(factory: PolicyFactory) -> None:
    """Release what a policy factory holds for its episodes (``ChatCompletionsFactory``'s client);
    nothing for a policy class.

    Args:
        factory: What ``make_policy`` returned.
    """
    aclose = getattr(factory, "aclose", None)
    if aclose is not None and not isinstance(factory, type):
        await aclose()


def make_policy(model: str, endpoint: ModelEndpoint | None = None, *, shared: bool = False) -> PolicyFactory:
    """The policy factory of a model id (picklable, so executors can ship it).

    Args:
        model: ``local/scripted``, ``local/random`` or a chat-completions model id.
        endpoint: Where a model other than ``local/scripted`` / ``local/random`` is asked.
        shared: A chat-completions model's episodes share one HTTP client (connections reused
            across a run); the caller closes it with ``close_policy_factory`` at the run's end.

    Raises:
        PolicyError: The model is not a local policy and no endpoint is given. (A task the chosen
            policy cannot play, one without a reference solution or tools, fails its episode.)
    """
    if model == SCRIPTED_MODEL:
        return ScriptedPolicy
    if model == RANDOM_MODEL:
        return RandomPolicy
    if endpoint is None:
        raise PolicyError(
            f"model {model!r} needs a chat-completions endpoint, or use {SCRIPTED_MODEL!r} / {RANDOM_MODEL!r}"
        )
    return ChatCompletionsFactory(model, endpoint, shared=shared)


async def probe_endpoint(model: str, endpoint: ModelEndpoint, *, attempt_timeout: float = 30.0) -> None:
    """Ask ``model`` at ``endpoint`` one small question (a one-token reply), before a run relies on it.

    One request, not retried: it carries the endpoint's sampling parameters (``max_tokens`` set
    to 1), so a field the endpoint refuses shows up here too.

    Args:
        model: The model id sent as ``model``.
        endpoint: Where to ask.
        attempt_timeout: Seconds to wait for the answer.

    Raises:
        PolicyError: The endpoint cannot be reached, refuses the request (its status and body) or
            answers without ``choices[0].message``.
    """
    base = endpoint.base_url.rstrip("/")
    url = base if base.endswith("/chat/completions") else f"{base}/chat/completions"
    headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
    payload = {
        **endpoint.sampling.request_fields(),
        "model": model,
        "messages": [{"role": "user", "content": "Reply with OK."}],
        "max_tokens": 1,
    }
    try:
        async with httpx.AsyncClient(timeout=attempt_timeout, headers=headers) as client:
            response = await client.post(url, json=payload)
    except httpx.HTTPError as exc:
        raise PolicyError(f"model endpoint {url} failed: {type(exc).__name__}: {exc}") from None
    if response.status_code >= 400:
        raise PolicyError(f"model endpoint {url} answered {response.status_code}: {response.text[:300]}")
    try:
        data = response.json()
    except ValueError:
        raise PolicyError(f"model endpoint {url} answered non-JSON: {response.text[:300]}") from None
    if not isinstance(data, Mapping) or not _has_message(data):
        raise PolicyError(f"model endpoint {url} answered without choices[0].message: {str(data)[:300]}")


def _has_message(data: Mapping[str, Any]) -> bool:
    choices = data.get("choices")
    return (
        isinstance(choices, list)
        and bool(choices)
        and isinstance(choices[0], Mapping)
        and "message" in choices[0]
    )
