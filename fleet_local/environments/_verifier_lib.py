"""Source text shared by the bundled verifiers.

A verifier is a string of Python run in the verifier namespace (docs/verifier-runtime.md:
``normalized_contains``, ``TASK_SUCCESSFUL_SCORE``, ``TASK_FAILED_SCORE``, ``json``, ``re`` ... as
globals). Each bundled verifier is self-contained, and its entry point ``verify`` is its first
top-level function: the public SDK calls the first function of a verifier's code
(docs/verifier-runtime.md#the-entry-point), so the helpers it needs are written out *below*
``verify`` (a function looks its globals up when it runs, not when it is defined). Helpers only
use ``env.db(name).query(sql, args)`` (``.columns`` and ``.rows``), the call every runner offers.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ._definition import ReferenceStep, TaskDefinition

HELPERS = r'''
def table_rows(env, db, table):
    """Rows of a table keyed by their first column (the primary key)."""
    result = env.db(db).query("SELECT * FROM " + table + " ORDER BY 1", [])
    return {row[0]: dict(zip(result.columns, row)) for row in result.rows}


def table_diff(env, table):
    """(added, removed, modified) rows between the seed and the current database."""
    before = table_rows(env, "seed", table)
    after = table_rows(env, "current", table)
    added = [after[k] for k in sorted(after) if k not in before]
    removed = [before[k] for k in sorted(before) if k not in after]
    modified = [(before[k], after[k]) for k in sorted(before) if k in after and before[k] != after[k]]
    return added, removed, modified


def unexpected_changes(env, allowed=()):
    """Describe every change in a table outside ``allowed``."""
    problems = []
    for table in TABLES:
        if table in allowed:
            continue
        added, removed, modified = table_diff(env, table)
        if added or removed or modified:
            problems.append(
                "%s changed unexpectedly (%d added, %d removed, %d modified)"
                % (table, len(added), len(removed), len(modified))
            )
    return problems


def answer_text(final_answer):
    if final_answer is None:
        return ""
    if isinstance(final_answer, str):
        return final_answer
    return json.dumps(final_answer, sort_keys=True)


def answer_numbers(final_answer):
    """Every number in the answer ("$1,234.50" counts as 1234.5)."""
    text = answer_text(final_answer).replace(",", "")
    return [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", text)]


def report_app(app, successes, errors):
    """Print one per-app block (partial reward, docs/wire.md#verifiers) and return 1 when the app passed."""
    print("<<< VERIFY_" + app + " <<<")
    print(">>> SUCCESS_ACCUMULATOR >>>")
    print(repr([str(s) for s in successes]))
    print("<<< SUCCESS_ACCUMULATOR <<<")
    print(">>> ERROR_ACCUMULATOR >>>")
    print(repr([str(e) for e in errors]))
    print("<<< ERROR_ACCUMULATOR <<<")
    print(">>> VERIFY_" + app + " >>>")
    passed = 1 if successes and not errors else 0
    print("App %s: %d" % (app, passed))
    return passed


def report_combined(results):
    """Print the combined line; TASK_SUCCESSFUL_SCORE only when every app passed."""
    passed = sum(results)
    print("Combined result: %d/%d apps passed" % (passed, len(results)))
    return TASK_SUCCESSFUL_SCORE if passed == len(results) else TASK_FAILED_SCORE


def report_single(successes, errors):
    """Print the accumulators of a single-app verifier and return its score."""
    print(">>> SUCCESS_ACCUMULATOR >>>")
    print(repr([str(s) for s in successes]))
    print("<<< SUCCESS_ACCUMULATOR <<<")
    print(">>> ERROR_ACCUMULATOR >>>")
    print(repr([str(e) for e in errors]))
    print("<<< ERROR_ACCUMULATOR <<<")
    return TASK_SUCCESSFUL_SCORE if not errors else TASK_FAILED_SCORE

'''
"""Helper functions every bundled verifier has below its own code."""


def header(tables: Sequence[str]) -> str:
    """The imports and the ``TABLES`` constant of a verifier of an environment whose tables are ``tables``."""
    table_list = ", ".join(repr(t) for t in tables)
    return f"import json\nimport re\n\nTABLES = [{table_list}]\n"


def first_function(code: str) -> str | None:
    """The name of the first top-level function of ``code`` (the one the public SDK calls)."""
    tree = ast.parse(code)
    return next((n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)), None)


def verifier(tables: Sequence[str], body: str) -> str:
    """The full verifier code: :func:`header`, then ``body``, then :data:`HELPERS`.

    Args:
        tables: The environment's tables (``TABLES`` in the code).
        body: Code whose first top-level function is ``verify``; its own helpers go below it.

    Raises:
        ValueError: ``body`` starts with another function, which the public SDK would call instead.
    """
    found = first_function(body)
    if found != "verify":
        raise ValueError(f"a bundled verifier must define verify before any other function, not {found!r}")
    return header(tables) + "\n\n" + body.strip("\n") + "\n\n" + HELPERS


def step(tool: str, **params: Any) -> ReferenceStep:
    """One step of a reference solution: ``{"tool": tool, "params": params}``."""
    return {"tool": tool, "params": params}


@dataclass(frozen=True)
class TaskFactory:
    """Builds the task configs of one environment, which share everything but their content.

    Attributes:
        env_key: The environment (also the data key).
        env_version: Environment and data version.
        env_variables: ``CURRENT_DATE``, ``LOGGED_IN_USER``...
        tables: Tables the verifier code knows as ``TABLES`` (see :func:`verifier`).
        prompt_prefix: Text put before every prompt (who the user is, today's date).
    """

    env_key: str
    env_version: str
    env_variables: Mapping[str, str] = field(default_factory=dict)
    tables: Sequence[str] = ()
    prompt_prefix: str = ""

    def __call__(
        self,
        key: str,
        prompt: str,
        body: str,
        solution: list[ReferenceStep],
        tags: list[str],
        *,
        modality: Literal["tool_use", "browser_use"] = "tool_use",
    ) -> TaskDefinition:
        """One task config.

        Args:
            key: Task key suffix (the env key is prefixed).
            prompt: What the agent is asked.
            body: Verifier code whose first function is ``verify`` (its own helpers below it).
            solution: Reference solution steps (``computer`` actions for ``browser_use``).
            tags: Free-form tags.
            modality: ``tool_use``, or ``browser_use`` for a task solved in the web UI.
        """
        return {
            "task_key": f"{self.env_key}-{key}",
            "prompt": f"{self.prompt_prefix}{prompt}",
            "env_key": self.env_key,
            "env_version": self.env_version,
            "data_key": self.env_key,
            "data_version": self.env_version,
            "env_variables": dict(self.env_variables),
            "verifier_code": verifier(self.tables, body),
            "task_modality": modality,
            "metadata": {"reference_solution": solution, "tags": tags},
        }
