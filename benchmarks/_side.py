"""A benchmark's worker in a fresh interpreter on one checkout's packages (``--baseline`` runs).

The benchmark module named ``module`` defines ``side_worker()``: it prints ``ready``, then reads
one line of space-separated integers at a time and answers each with one line of JSON figures.
Both sides of an A/B run drive the same worker code (this checkout's ``benchmarks/``) against
their own ``fleet_sdk`` and ``fleet_local``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent


class Side:
    """``module``'s ``side_worker`` with ``checkout``'s packages first on the path.

    The worker runs with ``-P`` and in ``checkout``: ``python -c`` (and ``python -m``, how an
    older ``LocalFleet`` starts its server) put the current directory first on ``sys.path``, so a
    benchmark started from this checkout's root imported this checkout's packages on both sides.
    The worker checks where ``fleet_sdk`` and ``fleet_local`` came from before it starts.
    """

    def __init__(self, checkout: Path, module: str, benchmarks: Path = BENCHMARKS) -> None:
        env = {**os.environ, "PYTHONPATH": f"{checkout}{os.pathsep}{checkout / 'generated'}"}
        code = (
            "import asyncio, os, sys; sys.path.insert(0, sys.argv[1]);"
            "import fleet_local, fleet_sdk;"
            "wrong = [m.__file__ for m in (fleet_local, fleet_sdk)"
            " if not os.path.realpath(m.__file__).startswith(os.path.join(sys.argv[2], ''))];"
            "wrong and sys.exit(f'the worker imported {wrong}, not the packages of {sys.argv[2]}');"
            f"from {module} import side_worker; asyncio.run(side_worker())"
        )
        # Run in the checkout: ``-c`` (and ``-m fleet_local``, how ``LocalFleet`` starts a server)
        # puts the working directory first on the path, ahead of PYTHONPATH, so a baseline started
        # from another checkout would import that checkout's packages instead of its own.
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-c", code, str(benchmarks), os.path.realpath(checkout)],
            env=env,
            cwd=checkout,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._line() == "ready"

    def _line(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the benchmark worker exited ({self.process.wait()})")
        return line.strip()

    def run(self, *numbers: int) -> dict[str, float]:
        """One measurement: ``numbers`` as the worker reads them, its figures as it answers."""
        assert self.process.stdin is not None
        self.process.stdin.write(" ".join(str(n) for n in numbers) + "\n")
        self.process.stdin.flush()
        figures: dict[str, float] = json.loads(self._line())
        return figures

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def alternate(
    module: str, baseline: Path | None, rounds: int, *numbers: int
) -> dict[str, list[dict[str, float]]]:
    """Run ``module``'s worker on this checkout (``this``) and, given ``baseline``, on that one
    (``baseline``), ``rounds`` times, each round in the other order (A/B, B/A, ...), so a busy
    machine's swings land on both; prints each round's figures as they come.

    Args:
        module: The benchmark module whose ``side_worker`` answers.
        baseline: The other checkout, or ``None`` for this one alone.
        rounds: How many rounds.
        numbers: What each measurement is asked (see :meth:`Side.run`).

    Returns:
        Each side's figures, one dict per round.
    """
    sides = {"this": Side(BENCHMARKS.parent, module)}
    if baseline is not None:
        sides["baseline"] = Side(baseline.resolve(), module)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    try:
        for round_ in range(rounds):
            order = list(sides.items()) if round_ % 2 == 0 else list(reversed(sides.items()))
            for name, side in order:
                figures = side.run(*numbers)
                runs[name].append(figures)
                shown = "  ".join(f"{k} {v:.3f}" for k, v in figures.items())
                print(f"round {round_ + 1} {name:8s}: {shown}", flush=True)
    finally:
        for side in sides.values():
            side.close()
    return runs


def spread(ratios: list[float]) -> str:
    """``0.97x (quartiles 0.90-1.02, range 0.85-1.10``: the median ratio of A/B rounds and its
    spread (the caller closes the parenthesis, after anything it adds)."""
    import statistics

    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return (
        f"{statistics.median(ratios):4.2f}x (quartiles {quartiles[0]:4.2f}-{quartiles[2]:4.2f},"
        f" range {min(ratios):4.2f}-{max(ratios):4.2f}"
    )
