"""Start-up costs: importing the SDK, and starting the embedded local server.

``imports``: whole fresh interpreters, side by side in interleaved A/B/A/B rounds, each
printed as a ratio to ``python -c "import fleet"`` (the public Fleet SDK, ``fleet-python``,
pinned in the ``dev`` extra) measured in the same rounds: the median wall time, and the median
CPU time (user + system) of the process, which a busy machine disturbs far less. The target:
``from fleet_sdk import AsyncFleet, TaskEnv`` at most 0.6x. A bare interpreter (``pass``) is
printed too, for the floor.

``server``: ``LocalFleet().start()`` wall time with the server's own S3 endpoint on, interleaved
with an S3-less baseline. The target on a 2-core machine is a start under 3 s with S3 on.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

BASELINE = "import fleet"
IMPORTS = {
    "bare interpreter": "pass",
    "import fleet (public SDK)": BASELINE,
    "from fleet_sdk import AsyncFleet, TaskEnv": "from fleet_sdk import AsyncFleet, TaskEnv",
    "import fleet_sdk.integrations.openenv": "import fleet_sdk.integrations.openenv",
}
"""What each row imports, in a fresh interpreter (``python -c``)."""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _process_seconds(code: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one fresh interpreter running ``code``."""
    cpu, started = _children_cpu(), time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - started, _children_cpu() - cpu


def imports(rounds: int) -> None:
    """Print each row's median wall and CPU time, each as a ratio to ``import fleet``'s."""
    wall: dict[str, list[float]] = {name: [] for name in IMPORTS}
    cpu: dict[str, list[float]] = {name: [] for name in IMPORTS}
    for _ in range(rounds):
        for name, code in IMPORTS.items():  # one of each per round: load shifts hit every row alike
            seconds, used = _process_seconds(code)
            wall[name].append(seconds)
            cpu[name].append(used)
    base_wall = statistics.median(wall["import fleet (public SDK)"])
    base_cpu = statistics.median(cpu["import fleet (public SDK)"])
    width = max(len(name) for name in IMPORTS)
    print(f"{'':<{width}}  {'wall':>8}  {'ratio':>5}  {'CPU':>8}  {'ratio':>5}")
    for name in IMPORTS:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        columns = f"{w * 1000:5.0f} ms  {w / base_wall:5.2f}  {c * 1000:5.0f} ms  {c / base_cpu:5.2f}"
        print(f"{name:<{width}}  {columns}")
    print(f"(medians of {rounds} rounds; ratios to import fleet; target for AsyncFleet, TaskEnv: <= 0.6)")


def _start_stop(*, s3: bool) -> float:
    from fleet_local import LocalFleet

    server = LocalFleet(s3=s3)
    started = time.perf_counter()
    server.start()
    elapsed = time.perf_counter() - started
    server.stop()
    return elapsed


def server(rounds: int) -> None:
    """Print the median start of ``LocalFleet`` with and without its S3 endpoint."""
    baseline: list[float] = []
    full: list[float] = []
    for _ in range(rounds):
        baseline.append(_start_stop(s3=False))
        full.append(_start_stop(s3=True))
    base, with_s3 = statistics.median(baseline), statistics.median(full)
    print(f"start, no S3:   {base:6.2f} s (median of {rounds})")
    print(f"start, with S3: {with_s3:6.2f} s = {with_s3 / base:5.2f}x baseline (target < 3 s on 2 cores)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5, help="server starts per side")
    parser.add_argument("--import-rounds", type=int, default=21, help="interpreters per import row")
    parser.add_argument("--only", choices=("imports", "server"), help="one of the two measurements")
    args = parser.parse_args()
    if args.only in (None, "imports"):
        imports(args.import_rounds)
    if args.only in (None, "server"):
        server(args.rounds)
