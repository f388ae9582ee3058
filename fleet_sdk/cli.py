"""The ``fleet-sdk`` command line: ``serve`` (the local server) and ``demo``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path


def _serve(args: argparse.Namespace) -> int:
    from .local._server import API_KEY_ENV, serve
    from .local._state import LocalSettings

    settings = LocalSettings(
        data_dir=Path(args.data_dir).expanduser().resolve(),
        api_key=os.environ.get(API_KEY_ENV) or None,
        host=args.host,
        port=args.port,
        s3=not args.no_s3,
        faults_enabled=args.enable_faults,
        verifier_timeout=args.verifier_timeout,
        verifier_memory_mb=args.verifier_memory_mb,
        job_concurrency=args.job_concurrency,
        model_base_url=args.model_base_url,
        model_api_key=os.environ.get("FLEET_LOCAL_MODEL_API_KEY") or None,
        instance_ttl_seconds=args.instance_ttl_seconds,
        reaper_interval=args.reaper_interval,
        mcp_session_idle_timeout=args.mcp_session_idle_timeout,
    )
    if not args.quiet:
        print(f"fleet-sdk local server: data in {settings.data_dir}", file=sys.stderr)
    serve(settings)
    return 0


def _demo(args: argparse.Namespace) -> int:
    import asyncio

    from .demo import run_demo

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
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the local Fleet-compatible server")
    serve.add_argument("--host", default="127.0.0.1", help="interface to bind (default: loopback)")
    serve.add_argument("--port", type=int, default=8765, help="port (0 picks a free one)")
    serve.add_argument("--data-dir", default="./fleet-data", help="state directory (SQLite, instances)")
    serve.add_argument("--no-s3", action="store_true", help="do not start the S3-compatible endpoint")
    serve.add_argument("--enable-faults", action="store_true", help="serve the fault-injection admin API")
    serve.add_argument("--verifier-timeout", type=float, default=30.0, help="seconds per verifier run")
    serve.add_argument("--verifier-memory-mb", type=int, default=512, help="memory limit per verifier run")
    serve.add_argument("--job-concurrency", type=int, default=8, help="sessions a job runs at once")
    serve.add_argument("--model-base-url", default=None, help="OpenAI-compatible URL for model policies")
    serve.add_argument("--instance-ttl-seconds", type=int, default=3600, help="default instance TTL")
    serve.add_argument("--reaper-interval", type=float, default=5.0, help="seconds between TTL reaper passes")
    serve.add_argument(
        "--mcp-session-idle-timeout", type=float, default=1800.0, help="seconds an idle MCP session lives"
    )
    serve.add_argument("--quiet", action="store_true", help="print only the ready line")
    serve.set_defaults(handler=_serve)

    demo = commands.add_parser("demo", help="run every bundled task through TaskEnv on an embedded server")
    demo.add_argument("--out-dir", default="./fleet-demo", help="where transcripts are written")
    demo.add_argument("--random-episodes", type=int, default=4, help="tasks that also get a random policy")
    demo.add_argument("--concurrency", type=int, default=8, help="episodes run at once")
    demo.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    demo.set_defaults(handler=_demo)
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
