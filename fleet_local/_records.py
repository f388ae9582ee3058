"""The local server's typed records: what the store keeps of a thing, as pydantic models.

A record holds the wire model the API answers with (a generated model, validated where it is
made) and, beside it, the server's own fields that never reach the wire. It is stored as one
flat JSON document: the wire model's fields, plus each private field under its name prefixed
with ``_`` for instances and leases, under its own name for sessions, jobs and verifier
executions (the form each kind had before there were records, so older data directories read
the same, and the store's SQL can still read ``$.status``).
"""

from __future__ import annotations

from typing import Any, Generic, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fleet_sdk.types import browser_lease as lease_models
from fleet_sdk.types import env_instance as models
from fleet_sdk.types import sessions_ingest as smodels

__all__ = [
    "ExecutionPrivate",
    "ExecutionRecord",
    "ExecutionWire",
    "InstancePrivate",
    "InstanceRecord",
    "JobPrivate",
    "JobRecord",
    "LeasePrivate",
    "LeaseRecord",
    "SessionPrivate",
    "SessionRecord",
    "SessionWire",
]

Wire = TypeVar("Wire", bound=BaseModel)
Private = TypeVar("Private", bound=BaseModel)


def _private_name(name: str) -> str:
    return "_" + name


class _Record(Generic[Wire, Private]):
    """A wire model and, beside it, the server's own fields: a pair of pydantic models, each
    validated where it is made.

    A record read from the store parses its private part only when first asked for it: most
    reads (an instance's lookup by every manager route, MCP session and verifier run) need the
    wire part alone, and parsing both made such a lookup about 1.25x the ``json.loads`` of the
    dict it replaced (``benchmarks/bench_instance_records.py``).
    """

    __slots__ = ("_private", "_stored", "_wire")
    _wire_model: type[Wire]
    _private_model: type[Private]

    def __init__(self, wire: Wire, private: Private) -> None:
        self._wire = wire
        self._private: Private | None = private
        self._stored: str | None = None

    @classmethod
    def from_json(cls, text: str) -> Self:
        """The record of a stored document: its wire fields now, its ``_`` fields when asked.

        Each part is validated by pydantic-core as it parses (unknown keys are ignored), which
        costs about what ``json.loads`` of the text does.

        Args:
            text: The stored JSON text.
        """
        record = cls.__new__(cls)
        record._wire = cls._wire_model.model_validate_json(text)
        record._private = None
        record._stored = text
        return record

    @property
    def private(self) -> Private:
        """The server's own fields; nothing here reaches a response."""
        if self._private is None:
            assert self._stored is not None  # a record is made with one or the other
            self._private, self._stored = self._private_model.model_validate_json(self._stored), None
        return self._private

    def to_document(self) -> dict[str, Any]:
        """The flat JSON document to store (wire fields, then the ``_`` fields)."""
        return {
            **self._wire.model_dump(mode="json"),
            **self.private.model_dump(mode="json", by_alias=True),
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._wire!r}, private={self.private!r})"


class InstancePrivate(BaseModel):
    """An instance's server-side fields, stored as ``_<name>`` beside its wire fields.

    Attributes:
        window_seconds: Seconds the instance lives after its last heartbeat (or its creation);
            None in a document that predates it (the server's default TTL then applies).
        deadline: The ``time.time()`` at which the reaper ends it; None never.
        last_heartbeat: When it last received a heartbeat (ISO-8601), None before the first.
        image_type: ``image_type`` of the creating request (accepted, not used here).
        created_from: ``created_from`` of the creating request (accepted, not used here).
        reset_seed: The seed of its last reset, if any.
    """

    model_config = ConfigDict(alias_generator=_private_name, populate_by_name=True, extra="ignore")

    window_seconds: int | None = None
    deadline: float | None = None
    last_heartbeat: str | None = None
    image_type: str | None = None
    created_from: str | None = None
    reset_seed: int | None = None


class InstanceRecord(_Record[models.InstanceResponse, InstancePrivate]):
    """An instance as the store keeps it: its wire model, and the server's fields beside it.

    Args:
        instance: The wire model.
        private: The server's own fields.
    """

    __slots__ = ()
    _wire_model = models.InstanceResponse
    _private_model = InstancePrivate

    def __init__(self, instance: models.InstanceResponse, private: InstancePrivate) -> None:
        super().__init__(instance, private)

    @property
    def instance(self) -> models.InstanceResponse:
        """What ``GET /v1/env/instances/{id}`` answers (its ``urls`` as last stored; the service
        rebuilds them from the server's current address when it answers)."""
        return self._wire


class LeasePrivate(BaseModel):
    """A browser lease's server-side fields, stored as ``_<name>`` beside its wire fields.

    Attributes:
        start_url: The page its browser opens when it starts (``about:blank`` when None).
    """

    model_config = ConfigDict(alias_generator=_private_name, populate_by_name=True, extra="ignore")

    start_url: str | None = None


class LeaseRecord(_Record[lease_models.BrowserLease, LeasePrivate]):
    """A browser lease as the store keeps it: its wire model, and the server's fields beside it.

    Args:
        lease: The wire model.
        private: The server's own fields.
    """

    __slots__ = ()
    _wire_model = lease_models.BrowserLease
    _private_model = LeasePrivate

    def __init__(self, lease: lease_models.BrowserLease, private: LeasePrivate) -> None:
        super().__init__(lease, private)

    @property
    def lease(self) -> lease_models.BrowserLease:
        """What ``GET /v1/browser/{lease_id}`` answers."""
        return self._wire


class SessionWire(smodels.SessionInfo):
    """A session's ``SessionInfo`` as stored: its ``instance`` and ``verifier_execution`` are
    None here, since the service makes them when it answers (from the instance's record and the
    verifier execution); what the session itself recorded under those names is in
    :class:`SessionPrivate`."""

    @field_validator("instance", "verifier_execution", mode="before")
    @classmethod
    def _made_when_answered(cls, value: object) -> None:
        return None


class SessionPrivate(BaseModel):
    """A session's server-side fields, stored under their own names beside its wire fields
    (sessions were stored so before there were records: no ``_`` prefix).

    Attributes:
        source: ``job`` (played by an evaluation job) or ``ingest`` (uploaded).
        job_id: The job or trace job it belongs to (also the store's parent), if any.
        task_key: Key of the task it ran.
        task: The task document a job session plays (None for an ingested one).
        model_id: The model as the job or the upload named it (``provider/model``).
        pass_index: Which of a job's ``pass_k`` attempts it is.
        updated_at: When an ingest last changed it (ISO-8601).
        instance_id: The instance it ran on, when there was one.
        instance: The instance's fields as the session recorded them when it began.
        verifier_execution: The verifier run that graded a job session, as recorded.
        verifier_execution_id: Id of the verifier run that graded it.
        metadata: Free-form metadata (``score``, ``final_answer``).
        lease_id: The browser lease of a ``browser_use`` job session.
    """

    model_config = ConfigDict(extra="ignore")

    source: str | None = None
    job_id: str | None = None
    task_key: str | None = None
    task: dict[str, Any] | None = None
    model_id: str | None = None
    pass_index: int | None = None
    updated_at: str | None = None
    instance_id: str | None = None
    instance: dict[str, Any] | None = None
    verifier_execution: dict[str, Any] | None = None
    verifier_execution_id: str | None = None
    metadata: dict[str, Any] | None = None
    lease_id: str | None = None


class SessionRecord(_Record[SessionWire, SessionPrivate]):
    """A session as the store keeps it: its ``SessionInfo`` fields, and the server's beside them.

    Args:
        session: The wire fields.
        private: The server's own fields.
    """

    __slots__ = ()
    _wire_model = SessionWire
    _private_model = SessionPrivate

    def __init__(self, session: SessionWire, private: SessionPrivate) -> None:
        super().__init__(session, private)

    @property
    def session(self) -> SessionWire:
        """The session's wire fields (``instance`` and ``verifier_execution`` made on answering)."""
        return self._wire

    def to_document(self) -> dict[str, Any]:
        """The flat JSON document to store: the wire fields, then the server's (which hold what
        the session recorded as its ``instance`` and ``verifier_execution``)."""
        return {
            **self._wire.model_dump(mode="json", exclude={"instance", "verifier_execution"}),
            **self.private.model_dump(mode="json"),
        }


class JobPrivate(BaseModel):
    """An evaluation job's server-side fields, stored under their own names beside its wire
    fields (jobs were stored so before there were records: no ``_`` prefix).

    Attributes:
        model_prompts: The job's system prompt per model id, if it gave any.
        session_ids: Its sessions, in the order they were made.
    """

    model_config = ConfigDict(extra="ignore")

    model_prompts: dict[str, Any] | None = None
    session_ids: list[str] = Field(default_factory=list)


class JobRecord(_Record[models.Job, JobPrivate]):
    """An evaluation job as the store keeps it: its ``Job`` wire model, and the server's fields.

    Args:
        job: The wire model.
        private: The server's own fields.
    """

    __slots__ = ()
    _wire_model = models.Job
    _private_model = JobPrivate

    def __init__(self, job: models.Job, private: JobPrivate) -> None:
        super().__init__(job, private)

    @property
    def job(self) -> models.Job:
        """What ``GET /v1/jobs/{job_id}`` answers."""
        return self._wire


class ExecutionWire(models.VerifiersExecuteResponse):
    """A verifier execution's ``VerifiersExecuteResponse`` fields as stored: its
    ``execution_time_ms`` the stored time rounded to whole milliseconds, as answered (the exact
    time is :attr:`ExecutionPrivate.execution_time_ms`). ``version`` and ``bundle_cache_hit``
    belong to the answer to one request and are not stored."""

    @field_validator("execution_time_ms", mode="before")
    @classmethod
    def _rounded(cls, value: object) -> object:
        return round(value) if isinstance(value, float) else value


class ExecutionPrivate(BaseModel):
    """A verifier execution's server-side fields, stored under their own names beside its wire
    fields (executions were stored so before there were records: no ``_`` prefix).

    Attributes:
        execution_time_ms: How long the run took, in (fractional) milliseconds.
        score: The score read from what the verifier returned; None when it gave none.
        sha256: Digest of the code that ran.
        instance_id: The instance it ran against (also the store's parent).
    """

    model_config = ConfigDict(extra="ignore")

    execution_time_ms: float = 0.0
    score: float | None = None
    sha256: str | None = None
    instance_id: str | None = None


_ANSWER_ONLY = frozenset({"execution_time_ms", "version", "display_src", "comment", "bundle_cache_hit"})


class ExecutionRecord(_Record[ExecutionWire, ExecutionPrivate]):
    """A verifier execution as the store keeps it: its wire fields, and the server's beside them.

    Args:
        execution: The wire fields.
        private: The server's own fields.
    """

    __slots__ = ()
    _wire_model = ExecutionWire
    _private_model = ExecutionPrivate

    def __init__(self, execution: ExecutionWire, private: ExecutionPrivate) -> None:
        super().__init__(execution, private)

    @property
    def execution(self) -> ExecutionWire:
        """The execution's wire fields (``version`` and ``bundle_cache_hit`` set on answering)."""
        return self._wire

    def to_document(self) -> dict[str, Any]:
        """The flat JSON document to store: the wire fields but those of one answer, then the
        server's (which hold the exact ``execution_time_ms``)."""
        return {
            **self._wire.model_dump(mode="json", exclude=set(_ANSWER_ONLY)),
            **self.private.model_dump(mode="json"),
        }
