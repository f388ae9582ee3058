"""The ``fleet-sdk`` command line: ``serve`` (the local server), ``demo``, ``eval`` and ``report``."""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ._version import __version__

if TYPE_CHECKING:
    from fleet_local import ServerClaim


def _api_key(args: argparse.Namespace) -> tuple[str | None, bool]:
    """The key ``serve`` requires and whether it was generated (None: any key, ``--allow-any-key``)."""
    from fleet_local import API_KEY_ENV

    if args.allow_any_key:
        return None, False
    given = args.api_key or os.environ.get(API_KEY_ENV)
    if given:
        return given, False
    return f"local-{secrets.token_urlsafe(24)}", True


def _positive_int(text: str) -> int:
    """An argparse type: an int of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _positive_float(text: str) -> float:
    """An argparse type: a finite number above 0."""
    value = float(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number above 0, not {text}")
    return value


def _claim(args: argparse.Namespace, data_dir: Path) -> ServerClaim | None:
    """Take the port and the data dir before anything else starts (None: refused, said in one line)."""
    from fleet_local import claim_server

    from ._exceptions import ConfigurationError

    try:
        return claim_server(args.host, args.port, data_dir)
    except ConfigurationError as exc:
        print(f"fleet-sdk serve: error: {exc}", file=sys.stderr)
        return None


def _serve(args: argparse.Namespace) -> int:
    if args.allow_any_key and args.api_key:
        print("fleet-sdk serve: error: --api-key and --allow-any-key exclude each other", file=sys.stderr)
        return 2
    data_dir = Path(args.data_dir).expanduser().resolve()
    claim = _claim(args, data_dir)
    if claim is None:
        return 1
    from fleet_local import LocalSettings, serve

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
        model_api_key=os.environ.get("FLEET_LOCAL_MODEL_API_KEY") or None,
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
    from ._exceptions import ConfigurationError

    try:
        # A key the user chose is theirs to know; only a generated one is announced.
        serve(settings, ready_fields={"api_key": api_key} if generated else None, claim=claim)
    except ConfigurationError as exc:
        print(f"fleet-sdk serve: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        from ._cli_eval import EXIT_INTERRUPTED

        # uvicorn has shut down gracefully by now and only re-raises the signal: one line, no traceback.
        print("fleet-sdk serve: stopped (Ctrl-C)", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0


def _demo(args: argparse.Namespace) -> int:
    import asyncio

    from fleet_local import run_demo

    return asyncio.run(
        run_demo(
            out_dir=Path(args.out_dir),
            random_episodes=args.random_episodes,
            concurrency=args.concurrency,
            limit=args.limit,
        )
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``fleet-sdk``."""
    parser = argparse.ArgumentParser(prog="fleet-sdk", description="Fleet SDK tools.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser(
        "serve",
        help="run the local Fleet-compatible server",
        description=(
            "Run the local Fleet-compatible server in the foreground. Every request needs "
            "`Authorization: Bearer <key>`: the key is --api-key, else $FLEET_LOCAL_API_KEY, else "
            "one generated at startup and printed (stderr banner and the JSON ready line on stdout). "
            "--allow-any-key accepts any bearer key instead."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    serve.add_argument(
        "--api-key",
        default=None,
        help="the bearer key clients must send (prefer $FLEET_LOCAL_API_KEY: a command line is "
        "visible to other local users); also the secret of the local S3 endpoint",
    )
    serve.add_argument(
        "--allow-any-key", action="store_true", help="accept any bearer key (no key is generated)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="interface to bind")
    serve.add_argument("--port", type=int, default=8765, help="port (0 picks a free one)")
    serve.add_argument("--data-dir", default="./fleet-data", help="state directory (SQLite, instances)")
    serve.add_argument("--no-s3", action="store_true", help="do not start the S3-compatible endpoint")
    serve.add_argument("--enable-faults", action="store_true", help="serve the fault-injection admin API")
    serve.add_argument("--verifier-timeout", type=float, default=30.0, help="seconds per verifier run")
    serve.add_argument("--verifier-memory-mb", type=int, default=512, help="memory limit per verifier run")
    serve.add_argument(
        "--verifier-scratch-mb",
        type=int,
        default=64,
        help="size of a verifier run's scratch tmpfs and its /tmp",
    )
    serve.add_argument(
        "--verifier-concurrency",
        type=_positive_int,
        default=None,
        help="verifier runs at once (more wait, then 503); default: 2 per core, as memory allows",
    )
    serve.add_argument("--job-concurrency", type=int, default=8, help="sessions a job runs at once")
    serve.add_argument(
        "--job-browser-concurrency",
        type=int,
        default=2,
        help="browser leases (a Chromium each, 250-400 MiB) a job holds at once",
    )
    serve.add_argument(
        "--instance-browsers",
        type=int,
        default=2,
        help="instances whose cdp resource may hold a browser (a Chromium each, 250-400 MiB) at once",
    )
    serve.add_argument(
        "--max-browsers",
        type=int,
        default=None,
        help="browser leases live at once, server-wide (default: 4 per core, 1 per 2 GB of RAM)",
    )
    serve.add_argument("--model-base-url", default=None, help="OpenAI-compatible URL for model policies")
    serve.add_argument("--instance-ttl-seconds", type=int, default=3600, help="default instance TTL")
    serve.add_argument("--reaper-interval", type=float, default=5.0, help="seconds between TTL reaper passes")
    serve.add_argument("--query-timeout", type=float, default=30.0, help="seconds per SQL request")
    serve.add_argument("--query-concurrency", type=int, default=64, help="SQL statements run at once")
    serve.add_argument(
        "--max-body-bytes", type=int, default=32 * 1024 * 1024, help="largest request body (413 beyond)"
    )
    serve.add_argument(
        "--max-keyless-body-bytes",
        type=int,
        default=8 * 1024 * 1024,
        help="largest request body on the routes that need no key (instance manager API, MCP)",
    )
    serve.add_argument(
        "--mcp-session-idle-timeout", type=float, default=1800.0, help="seconds an idle MCP session lives"
    )
    serve.add_argument(
        "--allow-unjailed-verifiers",
        action="store_true",
        help="when the OS jail (bubblewrap) cannot start, run the verifiers of requests bearing the key "
        "under the audit hook alone: trusted code only (requests without the key are still refused)",
    )
    serve.add_argument(
        "--retention-seconds",
        type=_positive_float,
        default=None,
        help="keep finished instances, verifier results, sessions and transcripts this long "
        "(default: for ever)",
    )
    serve.add_argument("--quiet", action="store_true", help="print only the ready line")
    serve.set_defaults(handler=_serve)

    demo = commands.add_parser(
        "demo",
        help="run every bundled task through TaskEnv on an embedded server",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    demo.add_argument("--out-dir", default="./fleet-demo", help="where transcripts are written")
    demo.add_argument("--random-episodes", type=int, default=4, help="tasks that also get a random policy")
    demo.add_argument("--concurrency", type=int, default=8, help="episodes run at once")
    demo.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    demo.set_defaults(handler=_demo)

    from ._cli_eval import add_commands

    add_commands(commands)  # eval, report
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fleet-sdk`` command.

    Args:
        argv: Arguments (default: ``sys.argv[1:]``).
    """
    args = build_parser().parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
