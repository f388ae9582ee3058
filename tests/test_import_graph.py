"""The import graph of the installed package has no cycles, and light entry points stay light.

The graph is read statically (``ast`` over every module of ``fleet_sdk`` and the ``fleet_api``
alias). Between modules, every import that runs counts: module level and inside functions (a
cycle hidden in a function is still a cycle). Between packages, imports for type annotations
(under ``TYPE_CHECKING``) count too: a facade typed with a class of the package that builds it
is layered upside down even though Python would survive it.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOTS = ("fleet_sdk", "fleet_api")


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
    """A module's node in the package graph: a subpackage of ``fleet_sdk`` is one node, each
    top-level module of ``fleet_sdk`` is its own, and ``fleet_api`` is one."""
    parts = module.split(".")
    if parts[0] == "fleet_api":
        return "fleet_api"
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
    assert "fleet_sdk._runtime" in graph["fleet_sdk._generated.env_instance.client"]  # absolute from
    assert "fleet_sdk._generated.env_instance.models" in graph["fleet_sdk.env"]  # from X import module
    assert "fleet_sdk._protocol" in graph["fleet_sdk.local._policies"]  # relative, level 2
    assert "fleet_sdk._generated" in graph["fleet_api"]  # the alias points one way
    assert "fleet_sdk._api" not in graph["fleet_sdk.env"]  # only under TYPE_CHECKING there
    assert "fleet_sdk._api" in _graph(types=True)["fleet_sdk.env"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_cycle_between_modules() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "import cycles between modules:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_cycle_between_packages() -> None:
    cycles = _cycles(_package_graph(_graph(types=True)))
    assert not cycles, "import cycles between packages:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_nothing_in_fleet_sdk_imports_the_fleet_api_alias() -> None:
    graph = _graph()
    offenders = sorted(
        m
        for m, targets in graph.items()
        if m.startswith("fleet_sdk") and "fleet_api" in {t.split(".")[0] for t in targets}
    )
    assert not offenders


def test_the_local_server_imports_no_client_facade() -> None:
    """The server shares constants (``_protocol``) and generated models with the client, nothing
    that talks to a server: no ``Fleet``, ``Env``, MCP client, ``TaskEnv`` or HTTP runtime."""
    facades = {"fleet_sdk._client", "fleet_sdk.env", "fleet_sdk.mcp", "fleet_sdk.task_env"}
    graph = _graph(types=True)
    offenders = {
        (module, target)
        for module, targets in graph.items()
        if module.startswith("fleet_sdk.local")
        for target in targets
        if target in facades or target.startswith("fleet_sdk._runtime")
    }
    # LocalFleet hands out clients connected to the server it started: the one sanctioned way in.
    offenders -= {("fleet_sdk.local._server", "fleet_sdk._client")}
    assert not sorted(offenders)


def test_only_the_server_uses_its_internals() -> None:
    """The demo, the CLI and everything else outside ``fleet_sdk.local`` use its public names."""
    graph = _graph(types=True)
    offenders = sorted(
        (module, target)
        for module, targets in graph.items()
        if not module.startswith("fleet_sdk.local")
        for target in targets
        if target.startswith("fleet_sdk.local.")
    )
    assert not offenders, f"server internals used from outside: {offenders}"


@pytest.mark.parametrize("heavy", ["httpx", "anyio"])
def test_import_fleet_sdk_verifiers_loads_no_http_stack(heavy: str) -> None:
    code = f"import fleet_sdk.verifiers, sys; print({heavy!r} in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_fleet_api_alias_gives_the_generated_modules_themselves() -> None:
    code = (
        "from fleet_api.env_instance import models as old\n"
        "import fleet_api.traces_jobs.client as old_client\n"
        "from fleet_sdk._generated.env_instance import models as new\n"
        "from fleet_sdk._generated.traces_jobs import client as new_client\n"
        "import fleet_api._resource, fleet_sdk._generated._resource as new_resource\n"
        "print(old is new, old_client is new_client, old.InstanceRequest is new.InstanceRequest,\n"
        "      fleet_api._resource is new_resource)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["True", "True", "True", "True"]
