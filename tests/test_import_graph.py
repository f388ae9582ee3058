"""The import graph of the installed packages: no cycles, one-way layers, light entry points.

The graph is read statically (``ast`` over every module of ``fleet_sdk``, the server package
``fleet_local`` and the generated package ``fleet_generated``). Between
modules, every import that runs counts: module level and inside functions (a cycle hidden in a
function is still a cycle). Between packages, imports for type annotations (under
``TYPE_CHECKING``) count too: a facade typed with a class of the package that builds it is
layered upside down even though Python would survive it.

A name imported from a package that only re-exports it is followed to the module that defines
it (``_resolved``), so a rule about what a layer may reach cannot be passed by importing a
forbidden name through a permitted module.
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

# Where the SDK may reach into the server, all of them lazily (inside a function): the command
# line where it starts a server.
SERVER_DOORS = frozenset({"fleet_sdk.cli", "fleet_sdk._cli_eval"})


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


@cache
def _definitions(module: str) -> dict[str, str]:
    """Names ``module`` imports from others (type-only imports included), by the module it took
    each from: ``{"AsyncFleet": "fleet_sdk._client"}`` for ``fleet_sdk``."""
    known = _modules()
    path = known[module]
    package = _package_of(module, path)
    found: dict[str, str] = {}
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    type_only = [
        node for top in tree.body if isinstance(top, ast.If) and _is_type_checking(top) for node in top.body
    ]
    for node in [*tree.body, *type_only]:
        if not isinstance(node, ast.ImportFrom):
            continue
        base = _absolute(package, node)
        for alias in node.names:
            if f"{base}.{alias.name}" not in known and base in known:
                found[alias.asname or alias.name] = base
    return found


def _absolute(package: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, node.module] if node.module else parts)


def _resolve(module: str, name: str, seen: frozenset[str] = frozenset()) -> str:
    """The module that defines ``name`` as ``module`` exports it, following re-exports."""
    source = _definitions(module).get(name)
    if source is None or source in seen:
        return module
    return _resolve(source, name, seen | {module})


@cache
def _resolved(*, types: bool = True) -> dict[str, set[str]]:
    """The graph with every ``from M import name`` pointing at the module that defines ``name``
    (beside ``M`` itself, which also runs)."""
    known = _modules()
    plain = _graph(types=types)
    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        package = _package_of(module, path)
        targets: set[str] = set()
        for node in _walk(ast.parse(path.read_text(encoding="utf-8"), str(path)), types=types):
            if isinstance(node, ast.ImportFrom):
                base = _absolute(package, node)
                for alias in node.names:
                    if f"{base}.{alias.name}" in known:
                        targets.add(f"{base}.{alias.name}")
                    elif base in known:
                        targets.update({base, _resolve(base, alias.name)})
        graph[module] = (targets | plain[module]) - {module}
    return graph


def _lazy_imports_of(module: str, root: str) -> list[tuple[int, bool]]:
    """Each import of ``root`` in ``module``: its line, and whether it runs only when called
    (inside a function, or type-only)."""
    path = _modules()[module]
    found: list[tuple[int, bool]] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = (
                lazy or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) or _is_type_checking(child)
            )
            if isinstance(child, ast.Import | ast.ImportFrom):
                names = (
                    [a.name for a in child.names] if isinstance(child, ast.Import) else [child.module or ""]
                )
                if any(n == root or n.startswith(f"{root}.") for n in names) and not getattr(
                    child, "level", 0
                ):
                    found.append((child.lineno, inner))
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), False)
    return found


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


def test_re_exports_are_followed_to_the_defining_module() -> None:
    """``from fleet_sdk import AsyncFleet`` reaches ``fleet_sdk._client`` (a lazy name, declared
    under ``TYPE_CHECKING``), and a name imported through two re-exports is followed through both."""
    assert _resolve("fleet_sdk", "AsyncFleet") == "fleet_sdk._client"
    assert _resolve("fleet_sdk", "NotFoundError") == "fleet_sdk._exceptions"
    assert _resolve("fleet_sdk._runtime", "RequestOptions") == "fleet_generated._transport"
    resolved = _resolved()
    assert "fleet_sdk._client" in resolved["fleet_local._server"]


def test_no_cycle_between_modules() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "import cycles between modules:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_cycle_between_packages() -> None:
    cycles = _cycles(_package_graph(_graph(types=True)))
    assert not cycles, "import cycles between packages:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_generated_package_imports_no_hand_written_code() -> None:
    """``fleet_generated`` reaches the runtime only through the ``_transport`` protocols it
    declares (``fleet_sdk`` hands its runtime in), so there is no package cycle to survive."""
    offenders = sorted(
        (module, target)
        for module, targets in _resolved().items()
        if module.startswith("fleet_generated")
        for target in targets
        if not target.startswith("fleet_generated")
    )
    assert not offenders


def test_the_sdk_does_not_import_the_server() -> None:
    """``fleet_sdk`` reaches ``fleet_local`` only through its doors (the command line that starts
    a server, the deprecated alias), and there only lazily, re-exports followed."""
    reached = sorted(
        (module, target)
        for module, targets in _resolved().items()
        if module.startswith("fleet_sdk") and module not in SERVER_DOORS
        for target in targets
        if target.split(".")[0] == "fleet_local"
    )
    assert not reached, f"fleet_sdk modules that reach the server: {reached}"
    for door in sorted(SERVER_DOORS):
        imports = _lazy_imports_of(door, "fleet_local")
        assert imports, f"{door} no longer imports fleet_local: take it off SERVER_DOORS"
        eager = [line for line, lazy in imports if not lazy]
        assert not eager, f"{door} imports fleet_local at module level (lines {eager})"


# The private SDK modules the verifier sandbox uses: the child loads the runtime's stdlib-only
# modules by path (the package's ``__init__`` cannot run there); the parent runs the runtime's
# call convention and derives its sync twin as the SDK does.
SANDBOX_PRIVATE = frozenset(
    {
        "fleet_sdk._runtime._bridge",
        "fleet_sdk._twin",
        "fleet_sdk.verifiers._compat",
        "fleet_sdk.verifiers._entry",
        "fleet_sdk.verifiers._outcome",
        "fleet_sdk.verifiers._sqlite",
    }
)


def _public(module: str) -> bool:
    return not any(part.startswith("_") for part in module.split("."))


def test_the_server_uses_only_the_public_sdk() -> None:
    """Every import ``fleet_local`` makes of the SDK names a public module, and every name it takes
    from ``fleet_sdk`` itself is in ``fleet_sdk.__all__``; models come through ``fleet_sdk.types``."""
    import fleet_sdk

    known = _modules()
    offenders: list[str] = []
    for module, path in known.items():
        if not module.startswith("fleet_local"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                names = [(alias.name, None) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [(node.module or "", alias.name) for alias in node.names]
            else:
                continue
            for target, name in names:
                root = target.split(".")[0]
                if root == "fleet_generated":
                    offenders.append(f"{module}:{node.lineno} imports {target} (use fleet_sdk.types)")
                elif module.startswith("fleet_local.sandbox") and target in SANDBOX_PRIVATE:
                    continue
                elif root == "fleet_sdk" and not _public(target):
                    offenders.append(f"{module}:{node.lineno} imports private {target}")
                elif (
                    target == "fleet_sdk"
                    and name not in fleet_sdk.__all__
                    and name not in ("types", "protocol")
                ):
                    offenders.append(f"{module}:{node.lineno} imports {name} from fleet_sdk (not in __all__)")
    assert not offenders, "\n".join(offenders)


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
