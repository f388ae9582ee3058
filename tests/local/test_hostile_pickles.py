"""Hostile pickled verifier arguments over loopback: refused with a 400 naming ``args``, never decoded
by the server.

The public SDK's ``args`` is base64 of a pickle (schemas/env-instance.yaml). The server reads its
shape only, off the event loop; the verifier's sandboxed run decodes it. How long the server keeps
answering while such a request is dealt with is asserted in ``test_pickle_bombs_and_the_loop.py``.
"""

from __future__ import annotations

import base64
import pickle
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _http import raw_client
from _pickles import as_args, memo_dag

from fleet_local import LocalFleet
from fleet_sdk.types import env_instance as models
from fleet_sdk.verifiers import bundle_sha256, bundle_verifier

ECHO = """
def verify(env, *args, **kwargs):
    return {"score": 1, "args": list(args), "kwargs": sorted(kwargs)}
"""


@pytest.fixture
def keyless(local: LocalFleet) -> Iterator[httpx.Client]:
    """An attacker's client: no key (the manager routes need only an instance id)."""
    with httpx.Client(base_url=local.base_url, timeout=60) as client:
        yield client


def manager(instance_id: str) -> str:
    return f"/instances/{instance_id}/api/v1/env"


def body(args: str) -> dict[str, Any]:
    return {
        "key": "hostile-pickles",
        "sha256": bundle_sha256(ECHO),
        "bundle": base64.b64encode(bundle_verifier(ECHO)).decode("ascii"),
        "args": args,
    }


def execute(client: httpx.Client, instance_id: str, args: str) -> httpx.Response:
    return client.post(f"{manager(instance_id)}/execute_verifier_function", json=body(args))


def test_the_memo_dag_without_a_key_is_a_400_naming_args(
    keyless: httpx.Client, instance: models.InstanceResponse
) -> None:
    """265 bytes, sent with no key: a 64-level tuple DAG through the memo as a dict key. The server
    unpickled it on its event loop and hashed 2**64 leaves; every route timed out for good."""
    refused = execute(keyless, instance.instance_id, as_args(memo_dag(64)))
    assert refused.status_code == 400, refused.text
    assert refused.json()["code"] == "bad_request"
    assert refused.json()["detail"] == "args: more than 100000 values"
    assert keyless.get(f"{manager(instance.instance_id)}/health").status_code == 200


def test_an_unknown_instance_is_404_before_the_arguments_are_read(keyless: httpx.Client) -> None:
    """The arguments were decoded before the instance was looked up, so any id would do."""
    for args in (as_args(memo_dag(64)), "not base64!"):
        missing = execute(keyless, "inst_does_not_exist", args)
        assert missing.status_code == 404, missing.text
        assert missing.json()["code"] == "instance_not_found"


def test_an_int_keyword_of_5000_digits_is_a_400_not_a_500(
    keyless: httpx.Client, instance: models.InstanceResponse
) -> None:
    """The server quoted the key with ``repr``, which raises past 4,300 digits: a 500."""
    args = as_args(pickle.dumps({"args": (None,), "kwargs": {10**5000: "x"}}, protocol=5))
    refused = execute(keyless, instance.instance_id, args)
    assert refused.status_code == 400, refused.text
    assert refused.json()["detail"] == "args: keyword argument names must be strings, not int"


def test_a_container_changed_after_the_pickle_reused_it_is_a_400(
    keyless: httpx.Client, instance: models.InstanceResponse
) -> None:
    # {"args": (None, L, (L,)), "kwargs": {}}, L reached again through the memo and then changed:
    # counted before the change, L's values would be undercounted wherever it was reused.
    data = b"\x80\x05}\x8c\x04args(N]\x94h\x00\x85h\x00\x8c\x01xa0ts\x8c\x06kwargs}s."
    refused = execute(keyless, instance.instance_id, as_args(data))
    assert refused.status_code == 400, refused.text
    assert "changed after the pickle reused it" in refused.json()["detail"]


def test_values_the_memo_reuses_still_reach_the_verifier(
    local: LocalFleet, instance: models.InstanceResponse
) -> None:
    """The public SDK pickles an object passed twice through the memo; that stays accepted."""
    shared = [1, "two"]
    args = as_args(
        pickle.dumps({"args": (None, shared, shared, {"env": instance.instance_id}), "kwargs": {}})
    )
    for url in (
        "/v1/verifiers/execute",
        f"{manager(instance.instance_id)}/execute_verifier_function",
    ):
        with raw_client(local) as client:
            answer = client.post(url, json=body(args))
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"] == {"score": 1, "args": [shared, shared], "kwargs": []}
