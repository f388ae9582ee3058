"""Worker-thread hops and context switches of the server per scripted episode, at N=1 and N=64.

Each ``anyio.to_thread.run_sync`` or executor submit of a request is a queue put, a thread
wake-up, a GIL hand-off and a wake-up of the loop. This counts them in the server, with its CPU
(user and system) and its voluntary and involuntary context switches per episode, over rounds
that alternate N=1 and N=64 (the ``bench_episodes`` episodes). The server's figures come from
inside it (``getrusage(RUSAGE_SELF)``, which keeps the counts of worker threads that have exited,
as ``/proc/<pid>/task`` does not): a ``sitecustomize`` module put first on the server's path
counts the hops and answers ``SIGUSR1`` by writing the figures to a file.

``--baseline DIR`` runs the same in another checkout too (``git archive main | tar -x -C DIR``),
a fresh interpreter and server per side and round, in alternating order, and prints the medians
of both sides and their ratio.

``python benchmarks/bench_episode_hops.py [--episodes 64] [--rounds 4] [--baseline DIR --runs 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LEVELS = (1, 64)
FIGURES = ("hops", "user_ms", "sys_ms", "vol_ctx", "invol_ctx")

_SHIM = """
import collections, os, resource, signal
_out = os.environ.get("FLEET_BENCH_HOPS_OUT")
if _out:
    _hops = [0]
    import concurrent.futures.thread as _cft
    _submit = _cft.ThreadPoolExecutor.submit
    def submit(self, fn, /, *args, **kwargs):
        _hops[0] += 1
        return _submit(self, fn, *args, **kwargs)
    _cft.ThreadPoolExecutor.submit = submit
    import anyio.to_thread as _to_thread
    _run_sync = _to_thread.run_sync
    async def run_sync(func, *args, **kwargs):
        _hops[0] += 1
        return await _run_sync(func, *args, **kwargs)
    _to_thread.run_sync = run_sync
    def _dump(*_):
        r = resource.getrusage(resource.RUSAGE_SELF)
        with open(_out + ".tmp", "w") as fh:
            fh.write(f"{_hops[0]} {r.ru_utime} {r.ru_stime} {r.ru_nvcsw} {r.ru_nivcsw}")
        os.replace(_out + ".tmp", _out)
    signal.signal(signal.SIGUSR1, _dump)
"""


def _read(out: Path) -> list[float] | None:
    try:
        return [float(x) for x in out.read_text().split()]
    except FileNotFoundError:
        return None


async def _server_figures(pid: int, out: Path) -> list[float]:
    out.unlink(missing_ok=True)  # noqa: ASYNC240 - a benchmark's own temporary file
    os.kill(pid, signal.SIGUSR1)
    for _ in range(500):  # at most 5 s
        figures = _read(out)
        if figures is not None:
            return figures
        await asyncio.sleep(0.01)
    raise RuntimeError("the server did not answer SIGUSR1 (was the sitecustomize shim on its path?)")


async def one_side(episodes: int, rounds: int) -> dict[str, dict[str, float]]:
    """Figures per episode of this interpreter's checkout, by level (the shim must be on the path)."""
    sys.path.insert(0, str(HERE))
    from bench_episodes import measure, tool_use_tasks

    from fleet_local import LocalFleet

    out = Path(os.environ["FLEET_BENCH_HOPS_OUT"])
    sums = {level: [0.0] * len(FIGURES) for level in LEVELS}
    async with LocalFleet(s3=False) as local:
        assert local.pid is not None
        fleet = local.async_fleet()
        try:
            tasks = await tool_use_tasks(fleet)
            await measure(fleet, tasks, episodes, max(LEVELS))  # warm-up
            for _ in range(rounds):
                for level in LEVELS:
                    before = await _server_figures(local.pid, out)
                    await measure(fleet, tasks, episodes, level)
                    after = await _server_figures(local.pid, out)
                    for i, (b, a) in enumerate(zip(before, after, strict=True)):
                        sums[level][i] += a - b
        finally:
            await fleet.close()
    scale = (1.0, 1e3, 1e3, 1.0, 1.0)  # seconds to ms for the CPU figures
    return {
        str(level): {
            f: total * s / (episodes * rounds)
            for f, total, s in zip(FIGURES, sums[level], scale, strict=True)
        }
        for level in LEVELS
    }


def run_side(checkout: Path, episodes: int, rounds: int) -> dict[str, dict[str, float]]:
    """:func:`one_side` in a fresh interpreter on ``checkout``'s packages, with the shim first."""
    with tempfile.TemporaryDirectory(prefix="bench-hops-") as tmp:
        (Path(tmp) / "sitecustomize.py").write_text(_SHIM)
        path = os.pathsep.join([tmp, str(checkout), str(checkout / "generated")])
        env = {**os.environ, "PYTHONPATH": path, "FLEET_BENCH_HOPS_OUT": str(Path(tmp) / "figures")}
        argv = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--side",
            f"--episodes={episodes}",
            f"--rounds={rounds}",
        ]
        done = subprocess.run(
            argv, cwd=checkout, env=env, capture_output=True, text=True, timeout=900, check=False
        )
    if done.returncode != 0:
        raise RuntimeError(f"the side in {checkout} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _line(level: str, figures: dict[str, float]) -> str:
    return (
        f"N={level}: {figures['hops']:.1f} hops, user {figures['user_ms']:.2f} ms, "
        f"sys {figures['sys_ms']:.2f} ms, vol ctx {figures['vol_ctx']:.0f}, "
        f"invol ctx {figures['invol_ctx']:.1f} per episode"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=4, help="N=1 / N=64 rounds per server")
    parser.add_argument("--baseline", type=Path, help="another checkout, run alternately")
    parser.add_argument("--runs", type=int, default=3, help="servers per side with --baseline")
    parser.add_argument("--side", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        import fleet_local

        where = Path(fleet_local.__file__).resolve()
        if not where.is_relative_to(Path.cwd().resolve()):  # the side runs in its checkout
            raise SystemExit(f"imported {where}, not the fleet_local of {Path.cwd()}")
        print(json.dumps(asyncio.run(one_side(args.episodes, args.rounds))))
        return
    this = HERE.parent
    if args.baseline is None:
        for level, figures in run_side(this, args.episodes, args.rounds).items():
            print(_line(level, figures))
        return
    sides: dict[str, list[dict[str, dict[str, float]]]] = {"this": [], "baseline": []}
    for run in range(args.runs):
        order = [("this", this), ("baseline", args.baseline)]
        for name, checkout in order if run % 2 == 0 else order[::-1]:
            load = os.getloadavg()[0]
            figures = run_side(checkout, args.episodes, args.rounds)
            sides[name].append(figures)
            print(f"run {run + 1} {name} (load {load:.1f}):")
            for level, values in figures.items():
                print("  " + _line(level, values))
    for level in map(str, LEVELS):
        medians = {
            n: {f: statistics.median(r[level][f] for r in runs) for f in FIGURES} for n, runs in sides.items()
        }
        print(f"medians, this / baseline, N={level}:")
        for f in FIGURES:
            a, b = medians["this"][f], medians["baseline"][f]
            print(f"  {f:9s} {a:8.2f} / {b:8.2f} = {a / b if b else float('nan'):.2f}x")


if __name__ == "__main__":
    main()
