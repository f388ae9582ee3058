"""CPU of the local server's instance service per call, without HTTP: the store and its records.

Each side builds a server's state in its own interpreter (a fresh data dir, no HTTP server) and
runs blocks of instances through the service functions both checkouts have: ``create_instance``,
then per instance ``lookups`` x ``require_live`` (what every manager route, MCP session and
verifier run asks first), ``get_instance``, ``heartbeat`` and ``list_instances`` over the block,
then ``delete_instance``. Each phase's process CPU time is divided by its calls. This isolates
what HTTP, MCP and the verifier drown in ``bench_server_cpu.py`` (a lookup costs microseconds, an
episode milliseconds).

``--baseline DIR`` (``git archive <rev> | tar -x -C DIR``) alternates rounds with a worker on that
checkout's packages and prints each phase's ratio this/baseline; each worker names the
checkout it imported on stderr.

``python benchmarks/bench_instance_records.py [--instances 200] [--lookups 10] [--rounds 6]
[--baseline DIR]``
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

PHASES = ("create", "require_live", "get_instance", "heartbeat", "list_instances", "delete")


def _block(state: Any, instances: int, lookups: int) -> dict[str, float]:
    """Microseconds of CPU per call of each phase over one block of instances."""
    from fleet_local import _instances
    from fleet_sdk.types import env_instance as models

    spent = dict.fromkeys(PHASES, 0.0)
    calls = dict.fromkeys(PHASES, 0)

    def timed(phase: str, count: int, work: Any, *args: Any) -> Any:
        start = time.process_time()
        for _ in range(count):
            result = work(state, *args)
        spent[phase] += time.process_time() - start
        calls[phase] += count
        return result

    request = models.InstanceRequest(env_key="orderdesk", run_id="bench")
    ids = [timed("create", 1, _instances.create_instance, request).instance_id for _ in range(instances)]
    for instance_id in ids:
        timed("require_live", lookups, _instances.require_live, instance_id)
        timed("get_instance", 1, _instances.get_instance, instance_id)
        timed("heartbeat", 1, _instances.heartbeat, instance_id)
    timed("list_instances", 1, _instances.list_instances, "running", None, "bench")
    calls["list_instances"] = len(ids)  # per instance listed
    for instance_id in ids:
        timed("delete", 1, _instances.delete_instance, instance_id)
    return {phase: spent[phase] / calls[phase] * 1e6 for phase in PHASES}


async def side_worker() -> None:
    """Answer each line ``instances lookups`` with one block's figures (see ``_side``)."""
    from fleet_local._server import build_state
    from fleet_local._state import LocalSettings

    with tempfile.TemporaryDirectory(prefix="bench-records-") as folder:
        state = build_state(LocalSettings(data_dir=Path(folder), s3=False, retention_seconds=None))
        _block(state, 5, 1)  # warm up: seed built, imports done
        import fleet_local

        print(f"side: {Path(fleet_local.__file__).parent.parent}", file=sys.stderr, flush=True)
        print("ready", flush=True)
        for line in sys.stdin:
            instances, lookups = (int(part) for part in line.split())
            print(json.dumps(_block(state, instances, lookups)), flush=True)
        state.store.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--instances", type=int, default=200)
    parser.add_argument("--lookups", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--baseline", type=Path, default=None)
    args = parser.parse_args()

    sides = {"this": Side(Path(__file__).resolve().parent.parent, "bench_instance_records")}
    if args.baseline is not None:
        sides["baseline"] = Side(args.baseline.resolve(), "bench_instance_records")
    figures: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    try:
        for round_ in range(args.rounds):
            # Alternate which side goes first, so a load that drifts within a round favours neither.
            order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
            for name in order:
                result = sides[name].run(args.instances, args.lookups)
                figures[name].append(result)
                print(f"round {round_ + 1} {name}: " + " ".join(f"{p}={result[p]:.1f}" for p in PHASES))
    finally:
        for side in sides.values():
            side.close()

    print(f"\nCPU microseconds per call, median of {args.rounds} rounds ({args.instances} instances a round)")
    for phase in PHASES:
        line = f"{phase:15s} this {statistics.median(r[phase] for r in figures['this']):8.1f}"
        if "baseline" in figures:
            base = statistics.median(r[phase] for r in figures["baseline"])
            ratios = [a[phase] / b[phase] for a, b in zip(figures["this"], figures["baseline"], strict=True)]
            line += f"  baseline {base:8.1f}  this/baseline {spread(ratios)})"
        print(line)


if __name__ == "__main__":
    main()
