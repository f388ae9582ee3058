"""The server process's own CPU for one verifier run through the zygote, in process.

``bench_request_kinds.py`` gives the whole ``verify`` request (routing, middleware, the store);
this one isolates the sandbox's part of it: ``run_sandboxed`` of a small verifier, one run at a
time, through the pre-forked runner (the zygote, the server's default), timed with
``time.process_time`` of this process (every thread of it, none of the jailed children), and
``_prepare`` alone (the part run in a worker thread before each run, with its cleanup), timed
with ``time.thread_time``. Needs the OS jail with every part the zygote uses (Linux,
bubblewrap).

``--baseline DIR`` (``git archive <rev> | tar -x -C DIR``) measures the same against that
checkout's packages, the sides alternating round by round, and prints each figure's median
ratio this/baseline with its quartiles and range.

``python benchmarks/bench_verify_path.py [--runs 150] [--rounds 6] [--baseline DIR]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _side import alternate, spread

CODE = """
def verify(env, final_answer):
    print("checking")
    return 1.0 if final_answer == "42" else 0.0
"""
FIGURES = ("run_sandboxed", "prepare")


async def side_worker() -> None:
    """Runs of this interpreter's checkout; each line ``RUNS`` on stdin is answered with the
    CPU ms per run of each figure as a JSON line."""
    from fleet_local.sandbox import _sandbox, _zygote, run_sandboxed

    with tempfile.TemporaryDirectory(prefix="bench-verify-path-") as folder:
        root = Path(folder)
        for name in ("seed", "current"):
            with sqlite3.connect(root / f"{name}.db") as db:
                db.execute("CREATE TABLE t (x)")
        _zygote.set_database_roots([root])
        databases = {"seed": root / "seed.db", "current": root / "current.db"}
        for _ in range(5):  # warm up: the zygote starts on the first run
            outcome = await run_sandboxed(CODE, databases=databases, final_answer="42")
            assert outcome.score == 1.0, outcome.error
        print("ready", flush=True)
        loop = asyncio.get_running_loop()
        try:
            while line := await loop.run_in_executor(None, sys.stdin.readline):
                runs = int(line)
                started = time.process_time()
                for _ in range(runs):
                    outcome = await run_sandboxed(CODE, databases=databases, final_answer="42")
                run_ms = (time.process_time() - started) / runs * 1e3
                assert outcome.score == 1.0 and outcome.stdout == "checking\n", outcome
                started = time.thread_time()
                for _ in range(runs):
                    _sandbox._prepare(
                        CODE,
                        databases=databases,
                        final_answer="42",
                        function_name=None,
                        timeout=30.0,
                        memory_mb=512,
                        allow_unjailed=False,
                    ).cleanup()
                prepare_ms = (time.thread_time() - started) / runs * 1e3
                print(json.dumps({"run_sandboxed": run_ms, "prepare": prepare_ms}), flush=True)
        finally:
            _zygote.stop_zygote()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--baseline", type=Path, default=None)
    args = parser.parse_args()
    runs = alternate("bench_verify_path", args.baseline, args.rounds, args.runs)
    print("server CPU ms per run, median of the rounds" + (" (this / baseline)" if len(runs) > 1 else ""))
    for figure in FIGURES:
        medians = {name: statistics.median(r[figure] for r in rs) for name, rs in runs.items()}
        line = "  ".join(f"{name} {median:6.3f}" for name, median in medians.items())
        if len(runs) > 1:
            ratios = [a[figure] / b[figure] for a, b in zip(runs["this"], runs["baseline"], strict=True)]
            line += f"  {spread(ratios)})"
        print(f"  {figure:14s} {line}")


if __name__ == "__main__":
    main()
