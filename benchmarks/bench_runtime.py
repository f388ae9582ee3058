"""Per-request cost of the SDK runtime over loopback, against bare httpx to the same server.

The two sides alternate in blocks (bare, SDK, bare, SDK, ...) in one run, so load from other
processes falls on both alike; the ratio is of the per-side medians over the blocks.

``python benchmarks/bench_runtime.py [--requests 2000] [--block 100]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import httpx

from fleet_local import LocalFleet
from fleet_sdk.types import env_instance as models


def per_request(call: Callable[[], object], n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - started) / n


def main(requests: int, block: int) -> None:
    with LocalFleet(s3=False) as local, local.fleet() as fleet, httpx.Client() as bare:
        headers = {"Authorization": f"Bearer {local.api_key}"}
        url = f"{local.base_url}/v1/env/"

        def baseline() -> object:
            return [models.Environment.model_validate(e) for e in bare.get(url, headers=headers).json()]

        sides: dict[str, Callable[[], object]] = {
            "bare httpx + pydantic": baseline,
            "fleet_sdk runtime": fleet.api.control_plane.list_envs,
        }
        for call in sides.values():  # warm up both connections and caches
            per_request(call, 50)
        blocks: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(max(1, requests // block)):
            for name, call in sides.items():
                blocks[name].append(per_request(call, block))
    base = statistics.median(blocks["bare httpx + pydantic"])
    print(f"{len(blocks['fleet_sdk runtime'])} interleaved blocks of {block} requests per side:")
    for name, values in blocks.items():
        median = statistics.median(values)
        print(f"  {name:22s} {median * 1e6:8.1f} us/request  = {median / base:5.2f}x baseline")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--block", type=int, default=100)
    args = parser.parse_args()
    main(args.requests, args.block)
