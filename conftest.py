"""How a test run is put together, for ``tests/`` and ``contracts/`` alike.

Markers (registered in ``pyproject.toml``; ``tests/README.md`` says what each one means) are
given here by where a test lives, so a new test in a marked place is marked too:

- ``e2e``: everything in ``tests/e2e/``; ``integrations``: everything in ``tests/integrations/``;
- ``browser``: everything in a module whose name says ``browser`` or ``chromium`` (they start a
  Chromium, or are about browser leases), and the tests listed in :data:`BROWSER` (those that
  start a Chromium from another module);
- ``slow``: the modules and tests listed in :data:`SLOW` (each takes a second or more).

The quick subset is what none of them marks: ``pytest -m "not slow and not browser and not
integrations and not e2e"`` (``nox -s quick``). An ``-m`` of that form (``not a and not b``) keeps
the directories of the markers it leaves out from being imported at all.

``--shuffle-seed SEED`` runs the modules in a shuffled order and the tests inside each module
shuffled too (SEED is an integer, or ``random`` for a new one); the header and the summary name
the seed, so ``--shuffle-seed <it>`` replays the order. ``.ci/run`` runs the suite this way
once. Without the option tests run in file order.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

BROWSER_MODULE = re.compile(r"browser|chromium")
"""A module whose name matches is about browsers: its tests start a Chromium or use browser leases."""

BROWSER = (
    "tests/e2e/test_episodes.py::test_64_concurrent_episodes_complete",
    "tests/e2e/test_episodes.py::test_every_bundled_task_scores_1_with_its_reference_and_0_when_empty",
    "tests/local/test_server_lifecycle.py::test_a_sigkilled_server_leaves_no_browser_driver_or_verifier_behind",
    "tests/local/test_instance_resources.py::test_the_cdp_resource_is_a_browser_on_the_web_ui_that_dies_with_the_instance",
    "tests/e2e/test_cancel_and_fault_sweeps.py::test_a_lease_start_broken_at_every_request_leaves_nothing",
)
"""Node-id prefixes of the tests that start a Chromium outside a browser module (found by
watching which tests start one)."""

SLOW = (
    "contracts/test_fidelity.py",
    "contracts/test_public_sdk.py",
    "contracts/test_public_sdk_examples.py",
    "contracts/test_public_sdk_rewards.py",
    "contracts/test_public_sdk_structured_diff.py",
    "tests/local/test_first_day_python_edges.py::test_the_group_watchdog_ends_with_local_fleet",
    "tests/local/test_serve_client_env.py",
    "tests/local/test_discovery.py::test_a_server_without_the_route_gets_no_screenshots_and_a_5xx_is_asked_again",
    "tests/local/test_discovery.py::test_the_store_asks_once_and_uploads_to_the_named_bucket",
    "contracts/test_public_sdk_wire.py",
    "contracts/test_schemathesis.py",
    "tests/local/test_local_fleet_settings.py",
    "tests/local/test_mcp_endpoint_sessions.py::test_sessions_end_when_idle_or_when_their_instance_ends",
    "tests/local/test_verifiers_without_the_jail.py",
    "tests/local/test_instance_resources.py::test_no_cdp_resource_without_chromium",
    "tests/local/test_hostile_input.py::test_runs_beyond_the_concurrency_cap_wait_then_get_503_with_retry_after",
    "tests/local/test_hostile_input.py::test_without_the_jail_untrusted_code_never_runs_for_a_request_without_the_key",
    "tests/test_suite_markers.py::test_the_quick_subset_leaves_out_e2e_browser_and_slow_tests",
    "tests/local/test_cli_serve.py",
    "tests/local/test_cli_arguments.py",
    "tests/test_import_contracts.py",
    "tests/local/test_server_lifecycle.py",
    "tests/local/test_zygote_server_lifecycle.py",
    "tests/sandbox/test_verifier_zygote.py::test_a_timeout_kills_the_run_and_everything_in_it",
    "tests/test_codegen.py",
    "tests/e2e/test_cancel_and_fault_sweeps.py",
    "tests/test_readme.py",
    "tests/local/test_control_plane.py::test_ttl_expiry_and_restart",
    "tests/local/test_control_plane.py::test_verifier_faults_are_structured",
    "tests/local/test_evaluation_report_service.py::test_import_is_idempotent_by_digest_and_conflicts_on_change",
    "tests/local/test_evaluation_report_service.py::test_more_than_30_new_reports_a_minute_is_429",
    "tests/local/test_hostile_input.py::test_forty_runaway_queries_do_not_starve_the_server",
    "tests/local/test_hostile_input.py::test_runaway_queries_are_stopped_at_the_deadline_and_the_server_answers_after",
    "tests/local/test_hostile_input.py::test_without_the_jail_the_server_warns_and_refuses_verifiers",
    "tests/local/test_hostile_input.py::test_a_restart_after_kill_9_releases_the_instances_of_interrupted_sessions",
    "tests/local/test_hostile_input.py::test_a_restart_removes_verifier_scratch_dirs",
    "tests/local/test_hostile_input.py::test_rows_stored_with_lone_surrogates_before_are_read_back",
    "tests/local/test_jobs.py::test_chat_completions_policy_drives_the_tools",
    "tests/local/test_loop_under_attack.py",
    "tests/local/test_pickle_bombs_and_the_loop.py",
    "tests/sandbox/test_pickled_arguments.py::test_keys_that_collide_cost_the_run_its_time_not_the_caller",
    "tests/local/test_jobs.py::test_scripted_policy_solves_every_task_of_an_environment",
    "tests/local/test_s3.py::test_objects_and_session_urls_survive_a_restart",
    "tests/local/test_s3.py::test_without_s3_screenshots_keep_their_data_urls_and_go_nowhere",
    "tests/local/test_task_data_private.py::test_task_data_an_older_server_kept_public_moves_to_the_private_bucket",
    "tests/local/test_store_off_the_loop.py",
    "tests/test_context_manager.py::test_a_backtracking_search_is_a_tool_error_and_the_loop_keeps_running",
    "tests/sandbox/test_verifier_sandbox.py::test_infinite_loop_is_killed_at_the_timeout_and_output_is_capped",
    "tests/sandbox/test_verifier_sandbox.py::test_async_run_times_out",
    "tests/local/test_retention.py::test_a_server_with_a_retention_forgets_finished_episodes",
    "tests/local/test_soak.py",
    "tests/local/test_prune.py",
    "tests/local/test_retention_bounds.py",
    "tests/local/test_server_runs_its_own_package.py",
    "tests/sandbox/test_verifier_bytecode.py::test_a_killed_servers_copies_go_with_the_next_one_and_a_live_ones_stay",
)
"""Node-id prefixes (a module, or a test with all its parameters) of the slow tests the other
markers leave in the quick subset: each took a second or more of a full run on a busy 2-core
machine (servers of their own, subprocesses, deadlines that must run out, fuzzing)."""

_BY_DIRECTORY = {"tests/e2e/": "e2e", "tests/integrations/": "integrations"}
_SEED = pytest.StashKey[int | None]()
_LEFT_OUT = pytest.StashKey[frozenset[str]]()


def _matches(nodeid: str, prefixes: Iterable[str]) -> bool:
    """Whether ``nodeid`` is one of ``prefixes`` or a test inside one (``::`` or ``[`` follows)."""
    return any(nodeid == p or nodeid.startswith((f"{p}::", f"{p}[")) for p in prefixes)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--shuffle-seed",
        metavar="SEED",
        help="shuffle modules, and the tests inside each, with SEED (an integer, or 'random')",
    )


def pytest_configure(config: pytest.Config) -> None:
    seed = config.getoption("--shuffle-seed")
    if seed == "random":
        seed = str(random.SystemRandom().randrange(10**6))
    if seed is not None and not seed.isdigit():
        raise pytest.UsageError(f"--shuffle-seed takes an integer or 'random', not {seed!r}")
    config.stash[_SEED] = None if seed is None else int(seed)
    # -m "not a and not b": markers no selected test can carry (any other form: none known).
    expression = (config.getoption("markexpr") or "").strip()
    plain = re.fullmatch(r"not \w+(?: and not \w+)*", expression)
    config.stash[_LEFT_OUT] = frozenset(re.findall(r"not (\w+)", expression) if plain else ())


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A directory whose marker ``-m`` leaves out is not even imported (the quick subset skips
    importing OpenEnv, SkyRL and Ray, which takes seconds)."""
    for directory, marker in _BY_DIRECTORY.items():
        if marker in config.stash[_LEFT_OUT] and collection_path == config.rootpath / directory:
            return True
    return None


def _order(config: pytest.Config) -> str:
    seed = config.stash[_SEED]
    if seed is None:
        return "test order: file order (--shuffle-seed SEED|random shuffles it)"
    return f"test order: shuffled, --shuffle-seed {seed}"


def pytest_report_header(config: pytest.Config) -> str:
    return _order(config)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if config.stash[_SEED] is not None:  # again beside the failures, and under -q too
        terminalreporter.write_line(_order(config))


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker and fixtures regroup the order
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        nodeid = item.nodeid
        for directory, marker in _BY_DIRECTORY.items():
            if nodeid.startswith(directory):
                item.add_marker(marker)
        module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
        if BROWSER_MODULE.search(module) or _matches(nodeid, BROWSER):
            item.add_marker("browser")
        if _matches(nodeid, SLOW):
            item.add_marker("slow")
    seed = config.stash[_SEED]
    if seed is not None:
        items[:] = _shuffled(items, random.Random(seed))


def _shuffled(items: list[pytest.Item], rng: random.Random) -> list[pytest.Item]:
    """Modules in a random order; in each, its classes and functions in a random order, and the
    tests of each of those (a class's methods, a function's parameters) too. A module's tests stay
    together, so its module-scoped fixtures are still set up once."""
    modules: dict[str, dict[str, list[pytest.Item]]] = {}
    for item in items:
        module, _, rest = item.nodeid.partition("::")
        unit = rest.split("::", 1)[0].split("[", 1)[0]  # the class, or the function
        modules.setdefault(module, {}).setdefault(unit, []).append(item)
    order: list[pytest.Item] = []
    for units in rng.sample(list(modules.values()), len(modules)):
        for tests in rng.sample(list(units.values()), len(units)):
            order += rng.sample(tests, len(tests))
    return order
