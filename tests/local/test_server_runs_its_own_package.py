"""``LocalFleet`` starts a server of the ``fleet_local`` its caller imported, whatever the cwd.

What went wrong: the server was started as ``python -m fleet_local``, which puts the current
directory first on ``sys.path``. Started from a directory holding another ``fleet_local`` (a
checkout of another version, as ``benchmarks/bench_episodes.py --baseline`` does from this
checkout's root), the server ran that one instead: the benchmark's "baseline" server was this
checkout's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import fleet_local
from fleet_local import LocalFleet


def test_a_fleet_local_in_the_cwd_does_not_shadow_the_callers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shadow = tmp_path / "fleet_local"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("")
    (shadow / "__main__.py").write_text("raise SystemExit('the fleet_local of the cwd ran')\n")
    monkeypatch.chdir(tmp_path)
    with LocalFleet(s3=False, data_dir=tmp_path / "data") as local, local.fleet() as fleet:
        assert fleet.api.control_plane.list_tasks().tasks  # the real server, with its tasks
    assert Path(fleet_local.__file__).resolve().parent != shadow.resolve()
