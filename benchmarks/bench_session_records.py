"""CPU of the local server's sessions service per call, without HTTP: the store and its records.

Each side builds a server's state in its own interpreter (a fresh data dir, no HTTP server) and
runs blocks of sessions through the service functions both checkouts have: per session an
``ingest`` that creates it and one that appends to it (read, change, write back), then
``_job_sessions`` over the block (what ``GET /v1/sessions/job/{id}`` answers: every session
read and summarised, counted per session), ``_job_session_group`` (counted per session) and per
session ``_transcript``. Each phase's process CPU time is divided by its calls.

``--baseline DIR`` (``git archive <rev> | tar -x -C DIR``) alternates rounds with a worker on that
checkout's packages and prints each phase's ratio this/baseline; each worker names the checkout
it imported on stderr.

``python benchmarks/bench_session_records.py [--sessions 200] [--rounds 6] [--baseline DIR]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _side import Side, spread

PHASES = ("create", "append", "job_sessions", "job_group", "transcript")


def _block(state: Any, sessions: int) -> dict[str, float]:
    """Microseconds of CPU per call (per session for the listings) of each phase over one block."""
    from fleet_local import _sessions
    from fleet_local._state import new_id
    from fleet_sdk.types import sessions_ingest as smodels

    spent = dict.fromkeys(PHASES, 0.0)
    calls = dict.fromkeys(PHASES, 0)

    def timed(phase: str, work: Any, *args: Any) -> Any:
        start = time.process_time()
        result = work(state, *args)
        spent[phase] += time.process_time() - start
        calls[phase] += 1
        return result

    job_id = new_id("bench")
    state.store.put(
        "trace_job", job_id, {"job_id": job_id, "name": "bench", "created_at": "2026-01-01T00:00:00+00:00"}
    )
    message = [{"role": "assistant", "content": "done"}]
    first = {"job_id": job_id, "task_key": "orderdesk-t", "model": "anthropic/claude-x", "status": "running"}
    ids = []
    for _ in range(sessions):
        body = smodels.SessionIngestRequest.model_validate({"messages": message, **first})
        ids.append(timed("create", _sessions.ingest, body).session_id)
    for session_id in ids:
        more = {"session_id": session_id, "status": "completed", "metadata": {"score": 1.0}}
        timed(
            "append",
            _sessions.ingest,
            smodels.SessionIngestRequest.model_validate({"messages": message, **more}),
        )
    timed("job_sessions", _sessions._job_sessions, job_id)
    calls["job_sessions"] = len(ids)
    timed("job_group", _sessions._job_session_group, job_id)
    calls["job_group"] = len(ids)
    for session_id in ids:
        timed("transcript", _sessions._transcript, session_id)
    return {phase: spent[phase] / calls[phase] * 1e6 for phase in PHASES}


async def side_worker() -> None:
    """Answer each line ``sessions`` with one block's figures (see ``_side``)."""
    from fleet_local._server import build_state
    from fleet_local._state import LocalSettings

    with tempfile.TemporaryDirectory(prefix="bench-sessions-") as folder:
        state = build_state(LocalSettings(data_dir=Path(folder), s3=False, retention_seconds=None))
        _block(state, 5)  # warm up: imports done
        import fleet_local

        print(f"side: {Path(fleet_local.__file__).parent.parent}", file=sys.stderr, flush=True)
        print("ready", flush=True)
        for line in sys.stdin:
            print(json.dumps(_block(state, int(line))), flush=True)
        state.store.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--baseline", type=Path, default=None)
    args = parser.parse_args()

    sides = {"this": Side(Path(__file__).resolve().parent.parent, "bench_session_records")}
    if args.baseline is not None:
        sides["baseline"] = Side(args.baseline.resolve(), "bench_session_records")
    figures: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    try:
        for round_ in range(args.rounds):
            # Alternate which side goes first, so a load that drifts within a round favours neither.
            order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
            for name in order:
                result = sides[name].run(args.sessions)
                figures[name].append(result)
                print(f"round {round_ + 1} {name}: " + " ".join(f"{p}={result[p]:.1f}" for p in PHASES))
    finally:
        for side in sides.values():
            side.close()

    print(f"\nCPU microseconds per call, median of {args.rounds} rounds ({args.sessions} sessions a round)")
    for phase in PHASES:
        line = f"{phase:13s} this {statistics.median(r[phase] for r in figures['this']):8.1f}"
        if "baseline" in figures:
            base = statistics.median(r[phase] for r in figures["baseline"])
            ratios = [a[phase] / b[phase] for a, b in zip(figures["this"], figures["baseline"], strict=True)]
            line += f"  baseline {base:8.1f}  this/baseline {spread(ratios)})"
        print(line)


if __name__ == "__main__":
    main()
