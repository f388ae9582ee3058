"""The flags of ``fleet-sdk eval``: declared on its parser (``add_eval_arguments``), read back from
argparse's namespace as one typed value (``EvalFlags``).

What a flag means on its own is checked here (a bound, a sampling value that is not a number),
each problem one line naming the flag; what a flag means for the run (a model that needs an
endpoint, a resume that contradicts the stored run) is the plan's (``_cli_eval_plan``), which
tells both kinds together, so that one try shows every problem. ``[MODEL=]VALUE`` flags stay as
written until the plan knows the run's models, since ``MODEL=`` is read only for one of them.
"""

from __future__ import annotations

import argparse
import difflib
import json
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from .policies import SamplingParams

__all__ = [
    "DEFAULT_DEADLINE",
    "DEFAULT_MODELS",
    "SAMPLING_FLAGS",
    "SELECTION_FLAGS",
    "EvalFlags",
    "UsageError",
    "add_eval_arguments",
]

DEFAULT_MODELS = ("local/scripted", "local/random")
DEFAULT_DEADLINE = 3600.0
SAMPLING_FLAGS = {
    "temperature": "--temperature",
    "max_tokens": "--max-tokens",
    "top_p": "--top-p",
    "seed": "--seed",
    "extra_body": "--extra-body",
}
"""Each ``SamplingParams`` field and the ``[MODEL=]VALUE`` flag that sets it."""
SELECTION_FLAGS = {"env": "--env", "task_key": "--task-key", "tasks_file": "--tasks-file"}
"""Each task selection, as ``EvalFlags.selection`` names it, and its flag."""

_T = TypeVar("_T")


class UsageError(Exception):
    """Problems with the command line, one line each; nothing was played.

    Args:
        lines: The problems, each naming the flag at fault.
    """

    def __init__(self, lines: Sequence[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = list(lines)


def close(word: str, choices: Sequence[str]) -> str:
    """``; did you mean 'x'?`` for the choice closest to ``word``, or nothing."""
    found = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean {found[0]!r}?" if found else ""


def per_model(values: Sequence[str], models: Sequence[str]) -> tuple[str | None, dict[str, str]]:
    """Split ``[MODEL=]VALUE`` flag values into the shared value (the last one) and per-model ones."""
    shared: str | None = None
    own: dict[str, str] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if sep and name in models:
            own[name] = rest
        else:
            shared = value
    return shared, own


def _convert(flag: str, text: str, convert: Callable[[str], _T], what: str, problems: list[str]) -> _T | None:
    try:
        return convert(text)
    except ValueError:
        problems.append(f"{flag}: {text!r} is not {what}")
        return None


def _json_object(text: str) -> dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(text)
    return value


_CONVERTERS: dict[str, tuple[Callable[[str], Any], str]] = {
    "temperature": (float, "a number"),
    "max_tokens": (int, "an integer"),
    "top_p": (float, "a number"),
    "seed": (int, "an integer"),
    "extra_body": (_json_object, "a JSON object"),
}


@dataclass(frozen=True)
class EvalFlags:
    """The command line of ``fleet-sdk eval``, typed (``from_namespace``), its bounds checked (``problems``).

    Attributes:
        out_dir: The run directory (``--out-dir``).
        resume: ``--resume`` or ``--retry-errored`` was given.
        retry_errored: ``--retry-errored``.
        models: ``--model`` ids in order, repeats dropped; empty when none was given.
        k: ``-k`` (``problems``: below 1).
        concurrency: ``--concurrency`` (``problems``: below 1).
        max_steps: ``--max-steps`` (``problems``: below 1).
        max_errored: ``--max-errored`` (``problems``: outside 0 to 1).
        deadline: ``--deadline`` (``problems``: not positive).
        jobs: ``--jobs``.
        remote: ``--remote``.
        ray: ``--ray`` (``""``: a local Ray; None: not given).
        run_id: ``--run-id``.
        envs: ``--env`` values.
        task_keys: ``--task-key`` values.
        tasks_files: ``--tasks-file`` values, as written.
        model_base_urls: ``--model-base-url`` values, as written (``[MODEL=]URL``).
        sampling: Each ``SamplingParams`` field's ``[MODEL=]VALUE`` values, as written, when given.
    """

    out_dir: Path
    resume: bool = False
    retry_errored: bool = False
    models: tuple[str, ...] = ()
    k: int | None = None
    concurrency: int | None = None
    max_steps: int | None = None
    max_errored: float = 0.0
    deadline: float | None = None
    jobs: bool = False
    remote: bool = False
    ray: str | None = None
    run_id: str | None = None
    envs: tuple[str, ...] = ()
    task_keys: tuple[str, ...] = ()
    tasks_files: tuple[str, ...] = ()
    model_base_urls: tuple[str, ...] = ()
    sampling: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def from_namespace(cls, args: argparse.Namespace) -> EvalFlags:
        """The flags of ``args`` (the ``eval`` parser's namespace), typed; ``problems`` checks them.

        Args:
            args: The parsed command line.
        """
        return cls(
            out_dir=Path(args.out_dir),
            resume=bool(args.resume or args.retry_errored),
            retry_errored=bool(args.retry_errored),
            models=tuple(dict.fromkeys(args.model or ())),
            k=args.k,
            concurrency=args.concurrency,
            max_steps=args.max_steps,
            max_errored=args.max_errored,
            deadline=args.deadline,
            jobs=bool(args.jobs),
            remote=bool(args.remote),
            ray=args.ray,
            run_id=args.run_id,
            envs=tuple(args.env or ()),
            task_keys=tuple(args.task_key or ()),
            tasks_files=tuple(args.tasks_file or ()),
            model_base_urls=tuple(args.model_base_url or ()),
            sampling={name: tuple(getattr(args, name)) for name in SAMPLING_FLAGS if getattr(args, name)},
        )

    def problems(self) -> list[str]:
        """What is wrong with the flags on their own (a bound), one line each naming the flag.

        The plan tells these with what is wrong for the run, all at once (``make_plan``).
        """
        problems: list[str] = []
        for flag, value in (
            ("-k", self.k),
            ("--concurrency", self.concurrency),
            ("--max-steps", self.max_steps),
        ):
            if value is not None and value < 1:
                problems.append(f"{flag}: must be at least 1, got {value}")
        if not 0.0 <= self.max_errored <= 1.0:
            problems.append(f"--max-errored: must be a fraction from 0 to 1, got {self.max_errored}")
        if self.deadline is not None and self.deadline <= 0:
            problems.append(f"--deadline: must be positive, got {self.deadline}")
        return problems

    @property
    def sampling_given(self) -> list[str]:
        """The sampling flags given, as flags."""
        return [SAMPLING_FLAGS[name] for name in SAMPLING_FLAGS if name in self.sampling]

    @property
    def selects(self) -> bool:
        """Whether any task selection flag was given (without one, every task runs)."""
        return bool(self.envs or self.task_keys or self.tasks_files)

    def selection(self) -> dict[str, list[str]]:
        """The task selection flags as given (task files as absolute paths), by ``SELECTION_FLAGS`` name."""
        chosen: dict[str, list[str]] = {}
        given = {"env": self.envs, "task_key": self.task_keys, "tasks_file": self.tasks_files}
        for name in SELECTION_FLAGS:
            values = list(given[name])
            if name == "tasks_file":
                values = [str(Path(v).resolve()) for v in values]
            if values:
                chosen[name] = values
        return chosen

    def base_url(self, models: Sequence[str]) -> tuple[str | None, dict[str, str]]:
        """``--model-base-url`` for ``models``: the shared URL and each model's own."""
        return per_model(self.model_base_urls, models)

    def sampling_for(self, model: str, models: Sequence[str], problems: list[str]) -> SamplingParams:
        """The ``SamplingParams`` the flags give ``model`` of ``models``.

        Args:
            model: The model.
            models: The run's models (``MODEL=`` is read only for one of them).
            problems: Where a value that cannot be used is told, naming its flag.
        """
        from .policies import SamplingParams

        values: dict[str, Any] = {}
        for name, (convert, what) in _CONVERTERS.items():
            shared, own = per_model(self.sampling.get(name, ()), models)
            text = own.get(model, shared)
            if text is None:
                continue
            value = _convert(SAMPLING_FLAGS[name], text, convert, what, problems)
            if value is None:
                continue
            try:
                SamplingParams(**{name: value})
            except ValueError as exc:
                problems.append(f"{SAMPLING_FLAGS[name]}: {exc}")
                continue
            values[name] = value
        try:
            return SamplingParams(**values)
        except ValueError as exc:  # only a clash between the extra body and a named flag is left
            problems.append(f"--extra-body: {exc}")
            return SamplingParams(**{k: v for k, v in values.items() if k != "extra_body"})


def check_url(url: str, problems: list[str]) -> None:
    """A ``--model-base-url`` that is not an http(s) URL, or carries a key, is told in ``problems``."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        problems.append(f"--model-base-url: {url!r} is not an http(s) URL")
    elif parts.username or parts.password:
        problems.append("--model-base-url: put the key in FLEET_EVAL_MODEL_API_KEY, not in the URL")


def add_eval_arguments(parser: argparse.ArgumentParser, *, errored_exit: int) -> None:
    """Declare the flags of ``eval`` on its parser (``EvalFlags.from_namespace`` reads them back).

    Args:
        parser: The ``eval`` subcommand's parser.
        errored_exit: The exit code of a run with more errored episodes than ``--max-errored``.
    """
    every = "without --env, --task-key or --tasks-file, every task the server has (the bundled ones locally)"
    parser.add_argument(
        "--env", action="append", help=f"run every task of this environment (repeatable; default: {every})"
    )
    parser.add_argument("--tasks-file", action="append", help="a task file, JSON (repeatable; default: none)")
    parser.add_argument("--task-key", action="append", help=f"run this task (repeatable; default: {every})")
    parser.add_argument(
        "--model",
        action="append",
        help="model id (repeatable; default: local/scripted and local/random)",
    )
    parser.add_argument(
        "-k", type=int, default=None, help="samples per task and model (the k of pass@k; default 1)"
    )
    parser.add_argument(
        "--concurrency", type=int, default=None, help="episodes at once (default 4, or the resumed run's)"
    )
    parser.add_argument("--max-steps", type=int, default=None, help="step budget per episode (default 30)")
    parser.add_argument("--out-dir", default="./fleet-eval", help="the run directory (default: ./fleet-eval)")
    parser.add_argument("--run-id", default=None, help="the run id (default: run-<time>-<random>)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out-dir (every other setting is read from it; default: a new run)",
    )
    parser.add_argument(
        "--retry-errored",
        action="store_true",
        help="resume, and play the errored episodes again (graded ones are kept; default: off)",
    )
    parser.add_argument(
        "--max-errored",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help=f"errored episodes tolerated, as a fraction of the run, before exit {errored_exit} (default 0)",
    )
    parser.add_argument(
        "--jobs",
        action="store_true",
        help="let the server play the episodes as jobs (default: off, they are played here)",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=None,
        help=f"seconds to wait for the jobs of --jobs (default: {DEFAULT_DEADLINE:g})",
    )
    parser.add_argument(
        "--model-base-url",
        action="append",
        metavar="[MODEL=]URL",
        help="OpenAI-compatible chat-completions URL for models that are not local policies "
        "(key: FLEET_EVAL_MODEL_API_KEY; default: none, so only local/... models)",
    )
    parser.add_argument(
        "--temperature",
        action="append",
        metavar="[MODEL=]T",
        help="sampling temperature (default: the endpoint's)",
    )
    parser.add_argument(
        "--max-tokens",
        action="append",
        metavar="[MODEL=]N",
        help="most tokens per model reply (default: the endpoint's)",
    )
    parser.add_argument(
        "--top-p",
        action="append",
        metavar="[MODEL=]P",
        help="nucleus sampling mass, in (0, 1] (default: the endpoint's)",
    )
    parser.add_argument(
        "--seed", action="append", metavar="[MODEL=]N", help="the endpoint's sampling seed (default: none)"
    )
    parser.add_argument(
        "--extra-body",
        action="append",
        metavar="[MODEL=]JSON",
        help="more request fields, a JSON object (e.g. '{\"top_k\": 20}'; default: none)",
    )
    parser.add_argument(
        "--remote",
        action="store_true",
        help="use the platform (FLEET_API_KEY) instead (default: off, an embedded local server in --out-dir)",
    )
    parser.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="play the episodes on Ray actors: join the cluster at ADDRESS ('auto', 'ray://head:10001'), "
        "or start a local Ray without one; --concurrency is then per actor (one actor per node). "
        "With --remote the actors read FLEET_API_KEY from their own environment (default: off)",
    )
