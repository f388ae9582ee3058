"""Start-up time of the embedded local server (``LocalFleet().start()``), with its S3 endpoint and without.

Interleaved A/B/A/B runs; prints the median of each and the ratio to the S3-less baseline.
The target on a 2-core machine is a start under 3 s with S3 on.
"""

from __future__ import annotations

import argparse
import statistics
import time

from fleet_local import LocalFleet


def _start_stop(*, s3: bool) -> float:
    server = LocalFleet(s3=s3)
    started = time.perf_counter()
    server.start()
    elapsed = time.perf_counter() - started
    server.stop()
    return elapsed


def main(rounds: int) -> None:
    baseline: list[float] = []
    full: list[float] = []
    for _ in range(rounds):
        baseline.append(_start_stop(s3=False))
        full.append(_start_stop(s3=True))
    base, with_s3 = statistics.median(baseline), statistics.median(full)
    print(f"start, no S3:   {base:6.2f} s (median of {rounds})")
    print(f"start, with S3: {with_s3:6.2f} s = {with_s3 / base:5.2f}x baseline (target < 3 s on 2 cores)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    main(parser.parse_args().rounds)
