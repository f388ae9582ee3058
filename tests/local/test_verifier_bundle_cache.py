"""A verify request's bundle is decoded once per exact text, and its checks still hold each time.

The SDK sends the same base64 bundle with every verification of a task; ``decode_bundle``
remembers the source of each small bundle that decoded. What must not change: a bundle with a
sha256 that does not match is refused even after the same bytes decoded with the right one, a bad
bundle is refused every time, large bundles are not kept, and the memory is bounded. The verify
route looks up the code and the instance in one worker-thread hop; the code's errors still come
before the instance's.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet_local import _verifier_exec
from fleet_local._errors import LocalAPIError
from fleet_local._server import build_state
from fleet_local._state import LocalSettings, LocalState
from fleet_sdk.types import env_instance as models
from fleet_sdk.verifiers import bundle_sha256, bundle_verifier

CODE = "def verify(env, final_answer=None):\n    return 1.0\n"


def _bundle(code: str = CODE) -> str:
    return base64.b64encode(bundle_verifier(code)).decode("ascii")


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    _verifier_exec._decoded.clear()
    yield
    _verifier_exec._decoded.clear()


def test_a_repeated_bundle_is_decoded_once() -> None:
    """The second decode of the same text is the remembered source (no zip work)."""
    bundle, sha = _bundle(), bundle_sha256(CODE)
    assert _verifier_exec.decode_bundle(bundle, sha) == CODE
    assert len(_verifier_exec._decoded) == 1
    assert _verifier_exec.decode_bundle(bundle, sha) is _verifier_exec._decoded[(bundle, sha)]


def test_a_wrong_sha256_is_refused_after_the_right_one_decoded() -> None:
    """The sha256 is part of what is remembered: the same bytes sent with another digest must
    still be a 400."""
    bundle = _bundle()
    _verifier_exec.decode_bundle(bundle, bundle_sha256(CODE))
    with pytest.raises(LocalAPIError) as refused:
        _verifier_exec.decode_bundle(bundle, "0" * 64)
    assert refused.value.status == 400 and refused.value.code == "bad_bundle"


def test_a_bad_bundle_is_refused_every_time() -> None:
    """A failure is not remembered as anything."""
    for _ in range(2):
        with pytest.raises(LocalAPIError) as refused:
            _verifier_exec.decode_bundle(base64.b64encode(b"not a zip").decode(), None)
        assert refused.value.code == "bad_bundle"
    assert not _verifier_exec._decoded


def test_remembered_bundles_are_bounded_and_large_ones_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """At most ``_DECODED_MAX`` are kept, the oldest going first, and none larger than
    ``_DECODED_MAX_CHARS`` (a 5 MiB bundle must not stay in memory)."""
    monkeypatch.setattr(_verifier_exec, "_DECODED_MAX", 2)
    codes = [f"def verify(env):\n    return {n}.0\n" for n in range(3)]
    for code in codes:
        _verifier_exec.decode_bundle(_bundle(code))
    assert [source for source in _verifier_exec._decoded.values()] == codes[1:]
    large = "def verify(env):\n    return 1.0\n" + "#" * (_verifier_exec._DECODED_MAX_CHARS)
    assert _verifier_exec.decode_bundle(_bundle(large)) == large
    assert large not in _verifier_exec._decoded.values()


@pytest.fixture
def state(tmp_path: Path) -> Iterator[LocalState]:
    state = build_state(LocalSettings(data_dir=tmp_path / "data"))
    yield state
    state.store.close()


def _request(bundle: str, instance_id: str) -> models.VerifiersExecuteRequest:
    return models.VerifiersExecuteRequest(
        key="k",
        sha256=bundle_sha256(CODE),
        args=models.VerifierArgs(instance_id=instance_id),
        bundle=bundle,
    )


async def test_the_codes_error_comes_before_the_instances(state: LocalState) -> None:
    """Both looked up in one hop: a bad bundle for an unknown instance is still the bundle's 400,
    and a good bundle for an unknown instance the instance's 404."""
    with pytest.raises(LocalAPIError) as refused:
        await _verifier_exec.execute_verifier(state, _request("%%%", "inst_missing"), None, keyed=True)
    assert (refused.value.status, refused.value.code) == (400, "bad_bundle")
    with pytest.raises(LocalAPIError) as refused:
        await _verifier_exec.execute_verifier(state, _request(_bundle(), "inst_missing"), None, keyed=True)
    assert (refused.value.status, refused.value.code) == (404, "instance_not_found")
