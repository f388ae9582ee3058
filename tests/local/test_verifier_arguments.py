"""The verifier routes with the public SDK's argument forms and its manager body, over plain HTTP.

``args`` as a string is base64 of a pickle of ``{"args": (None, *positional, {"env": id}),
"kwargs": {...}}`` (schemas/env-instance.yaml, ``VerifiersExecuteRequest``): the server reads it
without running anything it names, calls ``verify(env, *positional, **kwargs)``, and refuses
(400, naming it) what is not plain data. The instance's ``execute_verifier_function`` also takes
``{function_code, function_name, text_solution}`` and answers ``{success, result, error, message}``.
"""

from __future__ import annotations

import base64
import os
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _http import raw_client

from fleet_local import LocalFleet
from fleet_sdk.types import env_instance as models
from fleet_sdk.verifiers import bundle_sha256, bundle_verifier

ECHO = """
def verify(env, *args, final_answer=None, **extra):
    count = env.db("current").table("orders").count()
    kinds = sorted(type(value).__name__ for value in extra.values())
    return {"score": 1 if final_answer == "42" else 0, "args": list(args), "kinds": kinds, "orders": count}
"""


@pytest.fixture
def api(local: LocalFleet) -> Iterator[httpx.Client]:
    with raw_client(local, timeout=60) as client:
        yield client


def pickled(value: Any) -> str:
    return base64.b64encode(pickle.dumps(value, protocol=5)).decode("ascii")


def body(instance_id: str, args: Any = None, **fields: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "key": "arguments",
        "sha256": bundle_sha256(ECHO),
        "bundle": base64.b64encode(bundle_verifier(ECHO)).decode("ascii"),
        "args": args,
        **fields,
    }
    if isinstance(args, dict) and "args" in args:  # the public SDK's pickle, placeholders included
        request["args"] = pickled(
            {"args": (None, *args["args"], {"env": instance_id}), "kwargs": args["kwargs"]}
        )
    return request


def test_pickled_keyword_arguments_reach_the_verifier(
    api: httpx.Client, instance: models.InstanceResponse
) -> None:
    call = {"args": ("first", 2), "kwargs": {"final_answer": "42", "tags": {"a"}, "pair": (1, 2)}}
    for url in ("/v1/verifiers/execute", f"{instance.urls.manager.api}/execute_verifier_function"):
        response = api.post(url, json=body(instance.instance_id, call))
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["success"] is True and answer["error"] is None
        assert answer["result"]["score"] == 1 and answer["result"]["args"] == ["first", 2]
        assert answer["result"]["kinds"] == ["set", "tuple"] and answer["result"]["orders"] > 0
    wrong = api.post(
        "/v1/verifiers/execute",
        json=body(instance.instance_id, {"args": (), "kwargs": {"final_answer": "7"}}),
    )
    assert wrong.json()["result"]["score"] == 0


class _Touch:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_that_names_a_callable_is_refused_and_never_run(
    api: httpx.Client, instance: models.InstanceResponse, tmp_path: Path
) -> None:
    marker = tmp_path / "the-server-ran-it"
    hostile = pickled({"args": (None, {"env": instance.instance_id}), "kwargs": {"x": _Touch(marker)}})
    response = api.post("/v1/verifiers/execute", json={**body(instance.instance_id), "args": hostile})
    assert response.status_code == 400
    assert response.json()["code"] == "bad_request"
    assert "posix.system" in response.json()["detail"] and response.json()["detail"].startswith("args:")
    assert not marker.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("not base64!", "args: not valid base64"),
        (base64.b64encode(b"plain text").decode(), "args: not a readable pickle"),
        (pickled(["a", "list"]), 'args: expected a pickled {"args": [...], "kwargs": {...}}'),
        (pickled({"args": (None,), "kwargs": {1: "x"}}), "args: keyword argument names must be strings"),
    ],
)
def test_arguments_that_cannot_be_honoured_are_refused(
    api: httpx.Client, instance: models.InstanceResponse, args: str, message: str
) -> None:
    manager = instance.urls.manager.api
    response = api.post(
        f"{manager}/execute_verifier_function", json={**body(instance.instance_id), "args": args}
    )
    assert response.status_code == 400, response.text
    assert response.json()["detail"].startswith(message)


def test_the_size_of_pickled_arguments_is_bounded_by_the_schema(
    api: httpx.Client, instance: models.InstanceResponse
) -> None:
    too_long = "A" * (1024 * 1024 + 4)
    response = api.post("/v1/verifiers/execute", json={**body(instance.instance_id), "args": too_long})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][:2] == ["body", "args"]


def test_args_array_passes_every_positional_argument(
    api: httpx.Client, instance: models.InstanceResponse
) -> None:
    """Without ``args``, ``args_array`` is the call: all its positional values, then the env entry
    (the server used to refuse more than one)."""
    request = {**body(instance.instance_id), "args_array": ["x", 3, {"env": instance.instance_id}]}
    response = api.post("/v1/verifiers/execute", json=request)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["args"] == ["x", 3]


def test_the_manager_runs_the_public_sdks_function_body(
    api: httpx.Client, instance: models.InstanceResponse
) -> None:
    url = f"{instance.urls.manager.api}/execute_verifier_function"
    code = (
        "    def same_orders(before, after, transcript=None):\n"
        "        return [before.table('orders').count() == after.table('orders').count(), transcript]\n"
    )
    ran = api.post(url, json={"function_code": code, "function_name": "same_orders", "text_solution": "t"})
    assert ran.status_code == 200, ran.text
    assert ran.json() == {
        "success": True,
        "result": [True, "t"],
        "error": None,
        "message": ran.json()["message"],
    }
    assert ran.json()["message"].startswith("same_orders ran in ")

    failed = api.post(url, json={"function_code": "def f(before):\n    return 1 / 0\n", "function_name": "f"})
    answer = failed.json()
    assert (failed.status_code, answer["success"], answer["result"]) == (200, False, None)
    # As the public SDK's own runner words it: "<class>: <message>" then the traceback.
    assert answer["error"].startswith("ZeroDivisionError: division by zero\n")
    assert "Traceback" in answer["error"]
    assert answer["message"] == "f failed: ZeroDivisionError: division by zero"

    missing = api.post(url, json={"function_code": "def f(before):\n    return 1\n"})
    assert missing.status_code == 422
    upload = api.post(
        f"{instance.urls.manager.api}/execute_verifier_function_with_upload",
        json={"function_code": "def f(before):\n    return 1\n", "function_name": "f"},
    )
    assert upload.status_code == 422  # that route takes bundles only


def test_a_bad_body_of_either_shape_names_its_field(
    api: httpx.Client, instance: models.InstanceResponse
) -> None:
    """The body is one of two shapes; a 422 names the field of the shape the body is closest to,
    not just ``body``."""
    url = f"{instance.urls.manager.api}/execute_verifier_function"
    long_answer = {
        "function_code": "def f(before):\n    return 1\n",
        "function_name": "f",
        "text_solution": "a" * 1_000_001,
    }
    assert [issue["loc"] for issue in api.post(url, json=long_answer).json()["detail"]] == [
        ["body", "text_solution"]
    ]
    bad_sha = {**body(instance.instance_id), "sha256": "not-hex"}
    assert [issue["loc"] for issue in api.post(url, json=bad_sha).json()["detail"]] == [["body", "sha256"]]
    empty = api.post(url, json={}).json()["detail"]
    assert all(issue["type"] == "missing" and len(issue["loc"]) == 2 for issue in empty) and empty
