"""A ``--baseline`` benchmark's worker imports the packages of the checkout it stands for.

What went wrong: ``benchmarks/_side.py`` started each side as ``python -c ...`` with the
checkout on ``PYTHONPATH``, but ``-c`` puts the current directory first on ``sys.path``. Run from
this checkout's root, as the README shows, both sides imported this checkout's ``fleet_sdk``
and ``fleet_local``, so every ``--baseline`` run compared this checkout with itself. So did the
baseline's server: ``LocalFleet`` (before it passed ``-P``) started it as ``python -m fleet_local``
in the same directory.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
from _side import Side  # noqa: E402

WORKER = """
import json, subprocess, sys
import fleet_local, fleet_sdk

async def side_worker():
    print("ready", flush=True)
    for line in sys.stdin:
        # As an older LocalFleet starts its server (no -P: the cwd comes first).
        server = subprocess.run([sys.executable, "-m", "fleet_local"], capture_output=True, text=True)
        files = {"fleet_local": fleet_local.__file__, "fleet_sdk": fleet_sdk.__file__}
        print(json.dumps({**files, "server": server.stdout.strip()}), flush=True)
"""


def _checkout(root: Path, name: str) -> Path:
    for package in ("fleet_local", "fleet_sdk"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    (root / "fleet_local" / "__main__.py").write_text(f"print({name!r})\n")
    return root


def test_the_worker_imports_the_baseline_checkout_even_from_this_checkouts_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Where `python benchmarks/bench_episodes.py --baseline DIR` runs: this checkout's root.
    monkeypatch.chdir(_checkout(tmp_path / "this", "this"))
    baseline = _checkout(tmp_path / "baseline", "baseline")
    benchmarks = tmp_path / "benchmarks"
    benchmarks.mkdir()
    (benchmarks / "fake_bench.py").write_text(WORKER)
    side = Side(baseline, "fake_bench", benchmarks)
    try:
        files = side.run(1)
    finally:
        side.close()
    assert Path(files["fleet_local"]).resolve().is_relative_to(baseline.resolve())
    assert Path(files["fleet_sdk"]).resolve().is_relative_to(baseline.resolve())
    assert files["server"] == "baseline"


def test_a_worker_that_imports_another_checkout_refuses_to_start(tmp_path: Path) -> None:
    """A checkout whose packages cannot be imported (none here) is never silently replaced by
    whatever else is on the path."""
    empty = tmp_path / "empty"
    empty.mkdir()
    benchmarks = tmp_path / "benchmarks"
    benchmarks.mkdir()
    (benchmarks / "fake_bench.py").write_text(WORKER)
    with pytest.raises(RuntimeError, match="worker exited"):
        Side(empty, "fake_bench", benchmarks)
