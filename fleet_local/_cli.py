"""The server's commands, ``fleet-sdk serve``, ``fleet-sdk demo`` and ``fleet-sdk prune``.

The SDK's command line never imports this package: it finds :func:`add_commands` through the
``fleet_sdk.server`` entry point (``pyproject.toml``), and so does ``fleet-sdk eval`` for its
embedded server (:data:`LocalFleet`, :func:`bundled_environments`). ``python -m fleet_local``
runs the same commands without installed package metadata (what ``LocalFleet`` starts).

Bad arguments end in one line on stderr and exit 2, a misspelt flag with a did-you-mean (the
SDK's parser); every flag's help shows its real default. Only ``argparse`` and the standard
library load here: what a command needs is imported when it runs.
"""

from __future__ import annotations

import argparse
import math
import os
import secrets
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._claim import ServerClaim
    from ._local_fleet import LocalFleet

__all__ = ["LocalFleet", "add_commands", "bundled_environments"]

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C (and as ``fleet-sdk eval`` exits)
API_KEY_ENV = "FLEET_LOCAL_API_KEY"  # also fleet_local._server.API_KEY_ENV, read without loading it
MAX_PORT = 65535


def __getattr__(name: str) -> Any:
    if name == "LocalFleet":  # loaded on first use: ``fleet-sdk --help`` stays light
        from ._local_fleet import LocalFleet

        return LocalFleet
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def bundled_environments() -> Mapping[str, Any]:
    """The bundled environments by key, each with its ``tasks`` (``fleet-sdk eval`` checks
    ``--env`` and ``--task-key`` against them before it starts a server)."""
    from .environments import registry

    return registry()


class _Help(argparse.HelpFormatter):
    """Shows a flag's default where it has one the help does not already say.

    ``ArgumentDefaultsHelpFormatter`` printed ``(default: None)`` for flags whose default is
    computed at start, ``(default: False)`` for switches, and a second default after help texts
    that give their own.
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            not action.option_strings
            or action.default in (None, False, argparse.SUPPRESS)
            or "default" in text
        ):
            return text
        return f"{text} (default: %(default)s)"


def _int_in(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an int from ``low`` to ``high`` (inclusive; no upper bound if None)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}") from None
        if value < low or (high is not None and value > high):
            bound = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"must be {bound}, not {value}")
        return value

    return parse


def _seconds(text: str) -> float:
    """An argparse type: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, not {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text}")
    return value


def _key(text: str) -> str:
    """An argparse type: a key that is not empty (an empty one was silently replaced before)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty (leave the flag out to have one generated)")
    return text


def _api_key(args: argparse.Namespace) -> tuple[str | None, bool]:
    """The key ``serve`` requires and whether it was generated (None: any key, ``--allow-any-key``)."""
    if args.allow_any_key:
        return None, False
    given = args.api_key if args.api_key is not None else os.environ.get(API_KEY_ENV)
    if given:
        return given, False
    return f"local-{secrets.token_urlsafe(24)}", True


def _claim(args: argparse.Namespace, data_dir: Path) -> ServerClaim | None:
    """Take the port and the data dir before anything else starts (None: refused, said in one line)."""
    from fleet_sdk import ConfigurationError

    from ._claim import claim_server

    try:
        return claim_server(args.host, args.port, data_dir)
    except ConfigurationError as exc:
        print(f"fleet-sdk serve: error: {exc}", file=sys.stderr)
        return None


def _serve(args: argparse.Namespace) -> int:
    if args.allow_any_key and args.api_key:
        print("fleet-sdk serve: error: --api-key and --allow-any-key exclude each other", file=sys.stderr)
        return EXIT_USAGE
    data_dir = Path(args.data_dir).expanduser().resolve()
    if data_dir.exists() and not data_dir.is_dir():
        print(f"fleet-sdk serve: error: --data-dir {args.data_dir}: not a directory", file=sys.stderr)
        return EXIT_USAGE
    claim = _claim(args, data_dir)
    if claim is None:
        return 1
    from fleet_sdk import ConfigurationError

    from ._server import MODEL_API_KEY_ENV, serve
    from ._state import LocalSettings

    api_key, generated = _api_key(args)
    settings = LocalSettings(
        data_dir=data_dir,
        api_key=api_key,
        host=args.host,
        port=args.port,
        s3=not args.no_s3,
        faults_enabled=args.enable_faults,
        verifier_timeout=args.verifier_timeout,
        verifier_memory_mb=args.verifier_memory_mb,
        verifier_scratch_mb=args.verifier_scratch_mb,
        verifier_concurrency=args.verifier_concurrency,
        job_concurrency=args.job_concurrency,
        job_browser_concurrency=args.job_browser_concurrency,
        instance_browsers=args.instance_browsers,
        max_browsers=args.max_browsers,
        model_base_url=args.model_base_url,
        model_api_key=os.environ.get(MODEL_API_KEY_ENV) or None,
        instance_ttl_seconds=args.instance_ttl_seconds,
        reaper_interval=args.reaper_interval,
        mcp_session_idle_timeout=args.mcp_session_idle_timeout,
        allow_unjailed_verifiers=args.allow_unjailed_verifiers,
        query_timeout=args.query_timeout,
        query_concurrency=args.query_concurrency,
        max_body_bytes=args.max_body_bytes,
        max_keyless_body_bytes=args.max_keyless_body_bytes,
        retention_seconds=args.retention_seconds,
    )
    if not args.quiet:
        print(f"fleet-sdk local server: data in {settings.data_dir}", file=sys.stderr)
        if generated:
            print(f"fleet-sdk local server: generated API key {api_key}", file=sys.stderr)
        elif api_key is None:
            print("fleet-sdk local server: --allow-any-key: every bearer key is accepted", file=sys.stderr)
        host, port = claim.socket.getsockname()[:2]
        key_shown = api_key if generated else ("<any key>" if api_key is None else "<your --api-key>")
        # The only two settings a client needs (platform, browser and screenshot URLs follow).
        settings_line = f"FLEET_BASE_URL=http://{host}:{port} FLEET_API_KEY={key_shown}"
        print(f"fleet-sdk local server: clients set {settings_line}", file=sys.stderr)
    try:
        # A key the user chose is theirs to know; only a generated one is announced.
        serve(settings, ready_fields={"api_key": api_key} if generated else None, claim=claim)
    except ConfigurationError as exc:
        print(f"fleet-sdk serve: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # uvicorn has shut down gracefully by now and only re-raises the signal: one line, no traceback.
        print("fleet-sdk serve: stopped (Ctrl-C)", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0


def _demo(args: argparse.Namespace) -> int:
    import asyncio

    from .demo import run_demo

    try:
        return asyncio.run(
            run_demo(
                out_dir=Path(args.out_dir),
                random_episodes=args.random_episodes,
                concurrency=args.concurrency,
                limit=args.limit,
            )
        )
    except KeyboardInterrupt:
        # asyncio.run has cancelled the episodes and stopped the server by now.
        print("\nfleet-sdk demo: stopped (Ctrl-C)", file=sys.stderr)
        return EXIT_INTERRUPTED


def _disk_usage(root: Path) -> int:
    """Bytes the files under ``root`` take on disk."""
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
            except OSError:  # removed meanwhile (a running server's file)
                continue
    return total


def _prune(args: argparse.Namespace) -> int:
    import sqlite3

    from ._retention import KINDS, REPLAY_FLOOR, prune
    from ._store import Store

    data_dir = Path(args.data_dir).expanduser().resolve()
    database = data_dir / "fleet.db"
    if not database.is_file():
        print(
            f"fleet-sdk prune: error: --data-dir {args.data_dir}: no local server data there (no fleet.db)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    size_before = _disk_usage(data_dir)
    try:
        store = Store(database)
        try:
            deleted = prune(store, args.older_than, data_dir=data_dir, dry_run=args.dry_run)
        finally:
            store.close()
    except sqlite3.Error as exc:  # a running server kept the database locked past the busy timeout
        print(f"fleet-sdk prune: error: {database}: {exc}; nothing more was deleted", file=sys.stderr)
        return 1
    verb = "would delete (dry run: nothing was deleted)" if args.dry_run else "deleted"
    print(
        f"fleet-sdk prune: {data_dir}: {verb}: what finished over {args.older_than:g} s ago, "
        f"replay records over {max(args.older_than, REPLAY_FLOOR):g} s old"
    )
    for kind, what in KINDS.items():
        print(f"  {kind:<27} {deleted.get(kind, 0):>7}  {what}")
    print(f"  {'total':<27} {sum(deleted.values()):>7}")
    mib = 2**20
    if args.dry_run:
        print(f"data dir: {size_before / mib:.1f} MiB")
    else:
        # fleet.db keeps its size: SQLite reuses the freed pages for what the server writes next.
        print(f"data dir: {size_before / mib:.1f} MiB before, {_disk_usage(data_dir) / mib:.1f} MiB after")
    return 0


def add_commands(commands: argparse._SubParsersAction[Any]) -> None:
    """Add ``serve``, ``demo`` and ``prune`` to the ``fleet-sdk`` command line.

    Args:
        commands: The SDK parser's subcommands.
    """
    _add_serve(commands)
    _add_demo(commands)
    _add_prune(commands)


def _add_serve(commands: argparse._SubParsersAction[Any]) -> None:
    serve = commands.add_parser(
        "serve",
        help="run the local Fleet-compatible server",
        description=(
            "Run the local Fleet-compatible server in the foreground. Every request needs "
            f"`Authorization: Bearer <key>`: the key is --api-key, else ${API_KEY_ENV}, else "
            "one generated at startup and printed (stderr banner and the JSON ready line on stdout). "
            "--allow-any-key accepts any bearer key instead."
        ),
        formatter_class=_Help,
    )
    serve.add_argument(
        "--api-key",
        type=_key,
        default=None,
        help=f"the bearer key clients must send (prefer ${API_KEY_ENV}: a command line is "
        "visible to other local users); also the secret of the local S3 endpoint",
    )
    serve.add_argument(
        "--allow-any-key", action="store_true", help="accept any bearer key (no key is generated)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="interface to bind")
    serve.add_argument("--port", type=_int_in(0, MAX_PORT), default=8765, help="port (0 picks a free one)")
    serve.add_argument("--data-dir", default="./fleet-data", help="state directory (SQLite, instances)")
    serve.add_argument("--no-s3", action="store_true", help="do not start the S3-compatible endpoint")
    serve.add_argument("--enable-faults", action="store_true", help="serve the fault-injection admin API")
    serve.add_argument("--verifier-timeout", type=_seconds, default=30.0, help="seconds per verifier run")
    serve.add_argument(
        "--verifier-memory-mb", type=_int_in(32), default=512, help="memory limit per verifier run, in MiB"
    )
    serve.add_argument(
        "--verifier-scratch-mb",
        type=_int_in(1),
        default=64,
        help="size of a verifier run's scratch tmpfs and its /tmp, in MiB",
    )
    serve.add_argument(
        "--verifier-concurrency",
        type=_int_in(1),
        default=None,
        help="verifier runs at once (more wait, then 503); default: 2 per core, as memory allows",
    )
    serve.add_argument("--job-concurrency", type=_int_in(1), default=8, help="sessions a job runs at once")
    serve.add_argument(
        "--job-browser-concurrency",
        type=_int_in(1),
        default=2,
        help="browser leases (a Chromium each, 250-400 MiB) a job holds at once",
    )
    serve.add_argument(
        "--instance-browsers",
        type=_int_in(0),
        default=2,
        help="instances whose cdp resource may hold a browser (a Chromium each, 250-400 MiB) at once",
    )
    serve.add_argument(
        "--max-browsers",
        type=_int_in(1),
        default=None,
        help="browser leases live at once, server-wide (default: 4 per core, 1 per 2 GB of RAM)",
    )
    serve.add_argument("--model-base-url", default=None, help="OpenAI-compatible URL for model policies")
    serve.add_argument("--instance-ttl-seconds", type=_int_in(1), default=3600, help="default instance TTL")
    serve.add_argument(
        "--reaper-interval", type=_seconds, default=5.0, help="seconds between TTL reaper passes"
    )
    serve.add_argument("--query-timeout", type=_seconds, default=30.0, help="seconds per SQL request")
    serve.add_argument("--query-concurrency", type=_int_in(1), default=64, help="SQL statements run at once")
    serve.add_argument(
        "--max-body-bytes",
        type=_int_in(1),
        default=32 * 1024 * 1024,
        help="largest request body (413 beyond)",
    )
    serve.add_argument(
        "--max-keyless-body-bytes",
        type=_int_in(1),
        default=8 * 1024 * 1024,
        help="largest request body on the routes that need no key (instance manager API, MCP)",
    )
    serve.add_argument(
        "--mcp-session-idle-timeout",
        type=_seconds,
        default=1800.0,
        help="seconds an idle MCP session lives",
    )
    serve.add_argument(
        "--allow-unjailed-verifiers",
        action="store_true",
        help="when the OS jail (bubblewrap) cannot start, run the verifiers of requests bearing the key "
        "under the audit hook alone: trusted code only (requests without the key are still refused)",
    )
    serve.add_argument(
        "--retention-seconds",
        type=_seconds,
        default=None,
        help="keep finished instances, verifier results, sessions and transcripts, trace jobs, "
        "backups of ended instances and screenshots this long (default: for ever; `fleet-sdk prune` "
        "deletes them once)",
    )
    serve.add_argument("--quiet", action="store_true", help="print only the ready line")
    serve.set_defaults(handler=_serve)


def _add_demo(commands: argparse._SubParsersAction[Any]) -> None:
    demo = commands.add_parser(
        "demo",
        help="run every bundled task through TaskEnv on an embedded server",
        description=(
            "Start an embedded local server, play every bundled task with its reference solution "
            "(which must score 1.0) and some tool-use tasks with random tool calls, print a table "
            "of rewards and write each transcript. Exit 1 if a reference solution scored less."
        ),
        formatter_class=_Help,
    )
    demo.add_argument("--out-dir", default="./fleet-demo", help="where transcripts are written")
    demo.add_argument(
        "--random-episodes", type=_int_in(0), default=4, help="tasks that also get a random policy"
    )
    demo.add_argument("--concurrency", type=_int_in(1), default=8, help="episodes run at once")
    demo.add_argument(
        "--limit", type=_int_in(1), default=None, help="only the first N tasks (default: every task)"
    )
    demo.set_defaults(handler=_demo)


def _add_prune(commands: argparse._SubParsersAction[Any]) -> None:
    prune = commands.add_parser(
        "prune",
        help="delete what a local server's data dir holds of finished work past an age",
        description=(
            "Delete, once, what a local server's data dir holds of finished work older than "
            "--older-than (what `fleet-sdk serve --retention-seconds` does every minute): terminated "
            "instances, verifier results, finished sessions with their transcripts, finished jobs, "
            "ended leases, idle trace jobs, backups of instances long gone, stray instance folders "
            "and screenshots no transcript refers to; and the replay records (Idempotency-Key, "
            "X-Request-ID) older than ten minutes at least. What is live is never touched. Safe to "
            "run while a server uses the data dir. Prints how many of each kind went."
        ),
        formatter_class=_Help,
    )
    prune.add_argument("--data-dir", default="./fleet-data", help="the server's state directory")
    prune.add_argument(
        "--older-than",
        type=_seconds,
        required=True,
        help="seconds since a finished record or file last changed",
    )
    prune.add_argument("--dry-run", action="store_true", help="count what would go, delete nothing")
    prune.set_defaults(handler=_prune)
