"""Verifier calls with the public SDK's pickled ``args``, against another checkout.

The public SDK (fleet-python) sends a verifier's arguments as base64 of a pickle of
``{"args": (None, *positional, {"env": <instance_id>}), "kwargs": {...}}`` to the instance's
``execute_verifier_function`` (no key needed). ``bench_episodes.py`` grades its episodes with a
final answer instead, so this is the path it does not cover. Each side is a fresh interpreter with
its own server and SDK from its checkout, warmed up once; each round makes ``--calls`` calls at
each concurrency on both sides back to back, in alternating order (A/B, B/A, ...). Printed are the
calls/s of each side per round and level, and per level the median ratio this/baseline with its
quartiles and range over the rounds.

``python benchmarks/bench_verifier_args.py --baseline DIR [--calls 16] [--concurrency 1,16] [--rounds 8]``
(``git worktree add DIR <commit>`` makes the baseline checkout)
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import pickle
import statistics
import sys
import time
from pathlib import Path

import httpx
from _side import Side, spread

from fleet_local import LocalFleet
from fleet_sdk.verifiers import bundle_sha256, bundle_verifier

HERE = Path(__file__).resolve().parent.parent
VERIFIER = """
def verify(env, label, numbers, *, final_answer=None, tags=()):
    count = env.db("current").table("orders").count()
    return 1 if final_answer == "42" and count > 0 and numbers == [1, 2, 3] and "a" in tags else 0
"""


async def side_worker() -> None:
    """One server of this interpreter's checkout, warmed up; each line ``N CALLS`` on stdin is
    answered with that run (``{"rate", "errors"}``) as a JSON line on stdout."""
    async with LocalFleet(s3=False) as local:
        headers = {"Authorization": f"Bearer {local.api_key}"}
        async with httpx.AsyncClient(base_url=local.base_url, timeout=300, headers=headers) as client:
            created = await client.post("/v1/env/instances", json={"env_key": "orderdesk"})
            instance = str(created.json()["instance_id"])
            call = {
                "args": (None, "label", [1, 2, 3], {"env": instance}),
                "kwargs": {"final_answer": "42", "tags": {"a", "b"}},
            }
            body = {
                "key": "bench-args",
                "sha256": bundle_sha256(VERIFIER),
                "bundle": base64.b64encode(bundle_verifier(VERIFIER)).decode(),
                "args": base64.b64encode(pickle.dumps(call, protocol=5)).decode(),
                "function_name": "verify",
                "timeout": 30,
            }
            url = f"/instances/{instance}/api/v1/env/execute_verifier_function"

            async def one(gate: asyncio.Semaphore) -> bool:
                async with gate:
                    answer = await client.post(url, json=body)
                return answer.status_code == 200 and answer.json().get("result") == 1

            async def run(level: int, calls: int) -> dict[str, float]:
                gate = asyncio.Semaphore(level)
                started = time.perf_counter()
                results = await asyncio.gather(*(one(gate) for _ in range(calls)))
                return {"rate": calls / (time.perf_counter() - started), "errors": results.count(False)}

            await run(4, 8)  # warm up
            print("ready", flush=True)
            loop = asyncio.get_running_loop()
            while line := await loop.run_in_executor(None, sys.stdin.readline):
                level, calls = (int(x) for x in line.split())
                print(json.dumps(await run(level, calls)), flush=True)


def against_baseline(baseline: Path, calls: int, levels: list[int], rounds: int) -> None:
    sides = {
        "this": Side(HERE, "bench_verifier_args"),
        "baseline": Side(baseline.resolve(), "bench_verifier_args"),
    }
    rates: dict[str, dict[int, list[float]]] = {name: {level: [] for level in levels} for name in sides}
    try:
        for round_ in range(rounds):
            order = list(sides.items()) if round_ % 2 == 0 else list(reversed(sides.items()))
            line = []
            for level in levels:
                for name, side in order:
                    run = side.run(level, max(calls, level))
                    rates[name][level].append(run["rate"])
                    line.append(f"{name} N={level} {run['rate']:6.2f}/s ({int(run['errors'])} errors)")
            print(f"round {round_ + 1}: " + "  ".join(line), flush=True)
    finally:
        for side in sides.values():
            side.close()
    for level in levels:
        ratios = [a / b for a, b in zip(rates["this"][level], rates["baseline"][level], strict=True)]
        this, base = statistics.median(rates["this"][level]), statistics.median(rates["baseline"][level])
        print(
            f"N={level}: this {this:6.2f} calls/s, baseline {base:6.2f}; this/baseline median"
            f" {spread(ratios)}, {rounds} rounds)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", type=Path, required=True, help="the other checkout")
    parser.add_argument("--calls", type=int, default=16, help="calls per level and round (default 16)")
    parser.add_argument("--concurrency", default="1,16", help="comma-separated levels (default 1,16)")
    parser.add_argument("--rounds", type=int, default=8, help="interleaved rounds (default 8)")
    args = parser.parse_args()
    against_baseline(args.baseline, args.calls, [int(x) for x in args.concurrency.split(",")], args.rounds)
