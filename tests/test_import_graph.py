"""What the import-linter contracts and ruff's PLC2701 cannot say: no cycles, light entry points.

The layers (the server above the SDK above the generated package, the SDK never importing the
server) are import-linter contracts in ``pyproject.toml`` and a private name imported across
packages is ruff's ``PLC2701``; both run in CI and ``nox -s lint``, and
``tests/test_import_contracts.py`` shows each catching a planted violation. What is left here:
no import cycle between modules (imports that run: module level and inside functions) or
between packages (type-only imports too: a facade typed with a class of the package that builds
it is layered upside down even though Python would survive it), and what each entry point loads.
The graph is read statically (``ast`` over every module of the three packages).
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOTS = ("fleet_sdk", "fleet_local", "fleet_generated")


@cache
def _modules() -> dict[str, Path]:
    """Every module of the installed packages: dotted name -> file."""
    found: dict[str, Path] = {}
    for root in ROOTS:
        spec = importlib.util.find_spec(root)
        assert spec is not None and spec.submodule_search_locations, f"{root} is not installed"
        base = Path(next(iter(spec.submodule_search_locations)))
        for path in sorted(base.rglob("*.py")):
            parts = path.relative_to(base).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((root, *parts))] = path
    return found


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
    )


def _walk(node: ast.AST, *, types: bool) -> Iterator[ast.AST]:
    """Every node under ``node``; the bodies of ``if TYPE_CHECKING:`` only when ``types``."""
    for child in ast.iter_child_nodes(node):
        if _is_type_checking(child) and not types:
            assert isinstance(child, ast.If)
            for other in child.orelse:
                yield other
                yield from _walk(other, types=types)
            continue
        yield child
        yield from _walk(child, types=types)


def _imports(module: str, path: Path, known: dict[str, Path], *, types: bool) -> Iterator[str]:
    """The modules of ``known`` that ``module`` imports (with ``types``: for annotations too)."""
    package = _package_of(module, path)
    for node in _walk(ast.parse(path.read_text(encoding="utf-8"), str(path)), types=types):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.name
                while name and name not in known:
                    name = name.rpartition(".")[0]
                if name:
                    yield name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join([*base_parts, node.module] if node.module else base_parts)
            else:
                base = node.module or ""
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    yield f"{base}.{alias.name}"
                elif base in known:
                    yield base


@cache
def _graph(*, types: bool = False) -> dict[str, set[str]]:
    known = _modules()
    return {
        module: {target for target in _imports(module, path, known, types=types) if target != module}
        for module, path in known.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for target in edges:
                if target not in index:
                    index[target] = low[target] = counter
                    counter += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                    advanced = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _package_node(module: str) -> str:
    """A module's node in the package graph: a subpackage of a root is one node, each top-level
    module of a root is its own."""
    parts = module.split(".")
    return ".".join(parts[:2])


def _package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    collapsed: dict[str, set[str]] = {}
    for module, targets in graph.items():
        node = _package_node(module)
        edges = collapsed.setdefault(node, set())
        edges.update(_package_node(t) for t in targets if _package_node(t) != node)
    return collapsed


def test_the_walker_sees_the_edges_it_must() -> None:
    """Guards the test itself: known edges of each import form are found."""
    graph = _graph()
    assert "fleet_generated._transport" in graph["fleet_generated._resource"]  # relative, level 1
    assert "fleet_generated.env_instance.models" in graph["fleet_sdk.remote_verifier"]  # from X import module
    assert "fleet_sdk.protocol" in graph["fleet_sdk.policies"]  # relative
    assert "fleet_sdk.policies" in graph["fleet_local._episodes"]  # absolute, across roots
    assert "fleet_sdk._api" not in graph["fleet_sdk.env"]  # only under TYPE_CHECKING there
    assert "fleet_sdk._api" in _graph(types=True)["fleet_sdk.env"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_cycle_between_modules() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "import cycles between modules:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_cycle_between_packages() -> None:
    cycles = _cycles(_package_graph(_graph(types=True)))
    assert not cycles, "import cycles between packages:\n" + "\n".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize("heavy", ["httpx", "anyio"])
def test_import_fleet_sdk_verifiers_loads_no_http_stack(heavy: str) -> None:
    code = f"import fleet_sdk.verifiers, sys; print({heavy!r} in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_the_first_import_of_a_trainer_loads_no_surface_nor_http_stack() -> None:
    """``from fleet_sdk import AsyncFleet, TaskEnv`` loaded all five surfaces' clients and models
    and httpx (1.54x the public SDK's ``import fleet``): each now loads on first use
    (``benchmarks/bench_startup.py`` measures the time)."""
    code = (
        "import sys\n"
        "from fleet_sdk import AsyncFleet, TaskEnv\n"
        "heavy = ('httpx', 'asyncio', 'fleet_generated.env_instance', 'fleet_generated.traces_jobs',\n"
        "         'fleet_generated.sessions_ingest', 'fleet_generated.browser_lease',\n"
        "         'fleet_generated.evaluation_reports')\n"
        "print(sorted(name for name in heavy if name in sys.modules))\n"
        "fleet = AsyncFleet('key-0123456789', environ={})\n"
        "fleet.api.traces\n"
        "print(sorted(name for name in heavy if name in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    first, after_a_client = result.stdout.splitlines()
    assert first == "[]"
    assert after_a_client == "['asyncio', 'fleet_generated.traces_jobs', 'httpx']"


def test_import_fleet_sdk_loads_no_server() -> None:
    code = (
        "import fleet_sdk, fleet_sdk.evaluation, fleet_sdk.policies, fleet_sdk.cli, sys\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('fleet_local', 'fastapi', 'uvicorn')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_the_command_line_loads_the_servers_commands_but_not_the_server() -> None:
    """``fleet-sdk --help`` finds ``serve``, ``demo`` and ``prune`` through the entry point, loading the
    server's small command module only."""
    code = (
        "import sys\n"
        "from fleet_sdk.cli import build_parser\n"
        "commands = build_parser()._subparsers._group_actions[0].choices\n"
        "print(sorted(commands))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('fleet_local', 'fastapi', 'uvicorn')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.splitlines() == [
        "['demo', 'eval', 'prune', 'report', 'serve']",
        "['fleet_local', 'fleet_local._cli']",
    ]
