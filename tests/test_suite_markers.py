"""The suite's own plumbing (``conftest.py`` at the root): marker lists that name real tests,
markers given by where a test lives, and a shuffled order that keeps each module's tests together
and replays from its seed."""

from __future__ import annotations

import ast
import importlib.util
import itertools
import random
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _root_conftest() -> ModuleType:
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CONFTEST = _root_conftest()
DEFINITIONS = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


@pytest.mark.parametrize("entry", [*CONFTEST.SLOW, *CONFTEST.BROWSER])
def test_every_listed_entry_names_a_module_or_a_test_in_it(entry: str) -> None:
    """A renamed test would otherwise lose its marker without a word."""
    path, _, name = entry.partition("::")
    assert (ROOT / path).is_file(), f"{entry}: no such module"
    if name:
        defined = {n.name for n in ast.parse((ROOT / path).read_text()).body if isinstance(n, DEFINITIONS)}
        assert name in defined, f"{entry}: no such test in {path}"


def test_the_quick_subset_leaves_out_e2e_browser_and_slow_tests() -> None:
    paths = [
        "tests/e2e/test_heartbeats.py",  # e2e, by its directory
        "tests/local/test_traces_browser.py",  # browser, by its name
        "tests/test_readme.py",  # slow, listed
        "tests/test_types.py",  # none of them
    ]
    quick = "not slow and not browser and not integrations and not e2e"
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", quick]
    done = subprocess.run([*argv, *paths], capture_output=True, text=True, cwd=ROOT, check=True)
    collected = {line.split("::")[0] for line in done.stdout.splitlines() if "::" in line}
    assert collected == {"tests/test_types.py"}, done.stdout


def _items(nodeids: list[str]) -> list[SimpleNamespace]:
    return [SimpleNamespace(nodeid=nodeid) for nodeid in nodeids]


def test_a_shuffled_order_keeps_modules_and_classes_together_and_replays_from_its_seed() -> None:
    nodeids = [f"tests/test_{m}.py::test_{t}" for m in "abc" for t in range(6)]
    nodeids += [f"tests/test_a.py::TestGroup::test_{t}" for t in range(4)]
    nodeids += [f"tests/test_b.py::test_param[{p}]" for p in range(4)]
    order = [item.nodeid for item in CONFTEST._shuffled(_items(nodeids), random.Random(3))]
    assert sorted(order) == sorted(nodeids) and order != nodeids
    modules = [key for key, _ in itertools.groupby(n.split("::")[0] for n in order)]
    assert sorted(modules) == ["tests/test_a.py", "tests/test_b.py", "tests/test_c.py"]  # each in one run
    classes = [key for key, _ in itertools.groupby("TestGroup" in n for n in order)]
    assert classes.count(True) == 1
    again = [item.nodeid for item in CONFTEST._shuffled(_items(nodeids), random.Random(3))]
    assert again == order
    other = [item.nodeid for item in CONFTEST._shuffled(_items(nodeids), random.Random(4))]
    assert other != order
