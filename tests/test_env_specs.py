"""Environment and data specs: ``"key:version"`` parsing and the ``v`` prefix (docs/wire.md#instances)."""

from __future__ import annotations

import pytest

from fleet_sdk._refs import normalize_version, parse_ref


@pytest.mark.parametrize(
    ("spec", "key", "version"),
    [
        ("fira", "fira", None),
        ("fira:1.2.3", "fira", "v1.2.3"),
        ("fira:v1.2.3", "fira", "v1.2.3"),
        ("fira:latest", "fira", "latest"),
    ],
)
def test_env_spec_adds_v_to_numeric_versions(spec: str, key: str, version: str | None) -> None:
    assert parse_ref(spec) == (key, version)


def test_data_spec_is_one_key_version_string() -> None:
    """Regression: data_key and data_version as separate arguments broke callers; a spec string works."""
    assert parse_ref("orders:2.0", what="data") == ("orders", "v2.0")
    assert parse_ref("orders", version="2.0", what="data") == ("orders", "v2.0")
    with pytest.raises(ValueError, match="data spec"):
        parse_ref("orders:2.0", version="3.0", what="data")
    with pytest.raises(ValueError, match="key:version"):
        parse_ref("orders:", what="data")
    assert normalize_version("") is None
