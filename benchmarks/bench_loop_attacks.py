"""How fast the local server answers while a hostile request is dealt with.

Each attack once froze every route (a body parsed and schema-checked on the event loop, a
report rendered there in quadratic time, runaway SQL, CPU-spinning verifiers, a 265-byte pickle
of a tuple DAG through the memo that the server unpickled, hashing 2**64 leaves, and pickled
dict keys chosen to collide, which cost seconds to unpickle wherever it happens). While it runs,
a prober asks the instance manager's ``/health`` and the control plane's ``/v1/regions`` in
turn, every 20 ms; the same prober runs for as long again with no attack (the baseline),
alternating attack and baseline windows round by round (A/B, B/A, ...). Printed per attack:
the probes' p50, p99 and slowest during the attack and during its baseline windows, and the
ratio of the two p99s. The target is a p99 under 1 s during every attack.

``python benchmarks/bench_loop_attacks.py [--rounds 3] [--only NAME,...]``
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from fleet_local import LocalFleet
from fleet_sdk.reports import Outcome, Source, build_report
from fleet_sdk.verifiers import bundle_sha256, bundle_verifier

PROBE_EVERY = 0.02
RUNAWAY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
SPIN = "def verify(env):\n    while True:\n        pass\n"

Attack = Callable[[httpx.AsyncClient, httpx.AsyncClient, str, int], Awaitable[Any]]
"""``(keyed client, keyless client, instance id, round)``: builds the attack's bodies (before any
probe, so that building them never stalls the prober) and returns the requests to await."""


def memo_dag(levels: int = 64) -> bytes:
    """A dict keyed by a tuple DAG of ``levels`` levels, each ``(T, T)`` of the one below through the
    memo (``BINGET``, ``TUPLE2``, ``MEMOIZE``): 265 bytes, 2**64 leaves (tests/_pickles.py)."""
    out = bytearray(b"\x80\x05}\x94)\x94")
    for level in range(levels):
        out += b"h" + bytes([level + 1]) + b"\x86\x94"
    return bytes(out + b"Ns.")


def colliding_int_keys(count: int) -> bytes:
    """``{"args": (None, {k: 0, ...}), "kwargs": {}}`` with ``count`` int keys that all hash to 0
    (multiples of 2**61 - 1): quadratic to unpickle (tests/_pickles.py)."""
    out = bytearray(b"\x80\x05}\x8c\x04argsN}(")
    for i in range(1, count + 1):
        key = i * (2**61 - 1)
        raw = key.to_bytes((key.bit_length() + 8) // 8, "little", signed=True)
        out += b"\x8a" + bytes([len(raw)]) + raw + b"K\x00"
    return bytes(out + b"u\x86s\x8c\x06kwargs}s.")


def manager(instance_id: str) -> str:
    return f"/instances/{instance_id}/api/v1/env"


def post_json(client: httpx.AsyncClient, path: str, body: bytes) -> Awaitable[httpx.Response]:
    return client.post(path, content=body, headers={"Content-Type": "application/json"})


def report_body(run_id: str) -> bytes:
    """1000 tasks x 5 models, about 3.8 MB of JSON."""
    models = [f"provider/model-{m}" for m in range(5)]
    outcomes = [
        Outcome(
            task_key=f"task-{t:04d}",
            model=model,
            status="passed" if (t + m) % 3 else "failed",
            score=1.0 if (t + m) % 3 else 0.0,
            duration_ms=1234,
            error=None if (t + m) % 3 else "the answer was not in the orders table " * 8,
            last_action=f"get_order({{'order_id': {1000 + t}}})",
        )
        for t in range(1000)
        for m, model in enumerate(models)
    ]
    report = build_report(
        run_id=run_id,
        source=Source(kind="client"),
        suite_name="big",
        task_keys=[f"task-{t:04d}" for t in range(1000)],
        models=models,
        k=1,
        outcomes=outcomes,
    )
    return json.dumps(report.to_dict()).encode()


async def expect(status: int | tuple[int, ...], *requests: Awaitable[httpx.Response]) -> None:
    """Await ``requests`` together; each must answer ``status`` (one of them, for a tuple)."""
    allowed = (status,) if isinstance(status, int) else status
    for answer in await asyncio.gather(*requests):
        assert answer.status_code in allowed, (answer.status_code, answer.text[:300])


def huge_keyless_query(
    client: httpx.AsyncClient, keyless: httpx.AsyncClient, instance: str, _: int
) -> Awaitable[None]:
    body = json.dumps({"query": "SELECT 1", "args": list(range(400_000))}).encode()  # 7.6 MiB
    return expect(422, post_json(keyless, f"{manager(instance)}/resources/sqlite/current/query", body))


def million_value_ingest(
    client: httpx.AsyncClient, keyless: httpx.AsyncClient, instance: str, _: int
) -> Awaitable[None]:
    blocks = [{"type": "text", "text": "y" * 24}] * 30
    body = {"messages": [{"role": "user", "content": blocks}] * 10_000, "task_key": "t", "model": "m"}
    return expect(413, post_json(client, "/v1/sessions/ingest", json.dumps(body).encode()))  # 14 MiB


def long_ingest(
    client: httpx.AsyncClient, keyless: httpx.AsyncClient, instance: str, round_: int
) -> Awaitable[None]:
    messages = [{"role": "user", "content": "x" * 1460} for _ in range(10_000)]
    body = {"messages": messages, "job_id": f"job-long-{round_}", "task_key": "t", "model": "m"}
    return expect(200, post_json(client, "/v1/sessions/ingest", json.dumps(body).encode()))  # 14 MiB


def report_import_and_html(
    client: httpx.AsyncClient, keyless: httpx.AsyncClient, instance: str, round_: int
) -> Awaitable[None]:
    run_id = f"bench-report-{time.time_ns()}-{round_}"  # a new digest: nothing cached
    body = report_body(run_id)

    async def attack() -> None:
        await expect(201, post_json(client, "/v1/evaluation_reports", body))
        await expect(200, client.get(f"/v1/evaluation_reports/{run_id}", params={"format": "html"}))

    return attack()


def runaway_sql(
    client: httpx.AsyncClient, keyless: httpx.AsyncClient, instance: str, _: int
) -> Awaitable[None]:
    url = f"{manager(instance)}/resources/sqlite/current/query"
    return expect(400, *(keyless.post(url, json={"query": RUNAWAY}) for _ in range(24)))


def spinning_verifiers(
    client: httpx.AsyncClient, keyless: httpx.AsyncClient, instance: str, _: int
) -> Awaitable[None]:
    body = {
        "key": "spin",
        "sha256": bundle_sha256(SPIN),
        "args": {},
        "function_name": "verify",
        "timeout": 5,
        "bundle": base64.b64encode(bundle_verifier(SPIN)).decode(),
    }
    url = f"{manager(instance)}/execute_verifier_function"
    # Past the server's verifier slots a run waits, then is refused as busy (503).
    return expect((200, 503), *(keyless.post(url, json=body) for _ in range(8)))


def verifier_body(code: str, **fields: Any) -> dict[str, Any]:
    return {
        "key": "bench",
        "sha256": bundle_sha256(code),
        "function_name": "verify",
        "timeout": 5,
        "bundle": base64.b64encode(bundle_verifier(code)).decode(),
        **fields,
    }


def pickle_bomb(
    client: httpx.AsyncClient, keyless: httpx.AsyncClient, instance: str, _: int
) -> Awaitable[None]:
    body = json.dumps(verifier_body(SPIN, args=base64.b64encode(memo_dag()).decode())).encode()
    url = f"{manager(instance)}/execute_verifier_function"
    return expect(400, *(post_json(keyless, url, body) for _ in range(8)))


def colliding_pickled_keys(
    client: httpx.AsyncClient, keyless: httpx.AsyncClient, instance: str, _: int
) -> Awaitable[None]:
    body = json.dumps(
        verifier_body(SPIN, args=base64.b64encode(colliding_int_keys(40_000)).decode())
    ).encode()
    url = f"{manager(instance)}/execute_verifier_function"
    return expect(200, post_json(keyless, url, body))  # the run times out decoding them


ATTACKS: dict[str, Attack] = {
    "keyless query, 400k args (7.6 MiB, 422)": huge_keyless_query,
    "ingest, a million values (14 MiB, 413)": million_value_ingest,
    "ingest, 10k long messages (14 MiB, stored)": long_ingest,
    "report import + HTML (1000 tasks x 5 models)": report_import_and_html,
    "24 runaway SQL queries": runaway_sql,
    "8 CPU-spinning verifiers": spinning_verifiers,
    "8 pickle bombs, keyless (memo DAG, 400)": pickle_bomb,
    "colliding pickled keys, keyless (in the run)": colliding_pickled_keys,
}


async def probe_while(
    client: httpx.AsyncClient, instance: str, work: Awaitable[Any]
) -> tuple[list[float], float]:
    """Probe latencies while ``work`` runs, and how long it ran."""
    latencies: list[float] = []
    done = asyncio.Event()

    async def probe() -> None:
        while not done.is_set():
            for path in (f"{manager(instance)}/health", "/v1/regions"):
                started = time.perf_counter()
                answer = await client.get(path)
                latencies.append(time.perf_counter() - started)
                answer.raise_for_status()
            await asyncio.sleep(PROBE_EVERY)

    prober = asyncio.ensure_future(probe())
    started = time.perf_counter()
    try:
        await work
    finally:
        took = time.perf_counter() - started
        done.set()
        await prober
    return latencies, took


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(rounds: int, only: list[str] | None) -> None:
    attacks = {
        name: attack for name, attack in ATTACKS.items() if only is None or any(o in name for o in only)
    }
    async with (
        LocalFleet(s3=False, query_timeout=5, verifier_timeout=5) as local,
        httpx.AsyncClient(
            base_url=local.base_url,
            headers={"Authorization": f"Bearer {local.api_key}"},
            timeout=300,
            limits=httpx.Limits(max_connections=100),
        ) as client,
        httpx.AsyncClient(
            base_url=local.base_url, timeout=300, limits=httpx.Limits(max_connections=100)
        ) as keyless,
    ):
        created = await client.post("/v1/env/instances", json={"env_key": "orderdesk"})
        instance = str(created.json()["instance_id"])
        print(f"{'attack':46s} {'p50':>8s} {'p99':>8s} {'slowest':>8s}   baseline p50 / p99   p99 ratio")
        for name, attack in attacks.items():
            during: list[float] = []
            idle: list[float] = []
            for round_ in range(rounds):
                windows = ["attack", "idle"] if round_ % 2 == 0 else ["idle", "attack"]
                took = None
                for window in windows:
                    if window == "attack":
                        latencies, took = await probe_while(
                            client, instance, attack(client, keyless, instance, round_)
                        )
                        during += latencies
                    else:
                        # As long as the attack ran (or will run: the first round's guess is 2 s).
                        latencies, _ = await probe_while(client, instance, asyncio.sleep(took or 2.0))
                        idle += latencies
            p99, idle_p99 = quantile(during, 0.99), quantile(idle, 0.99)
            print(
                f"{name:46s} {quantile(during, 0.5) * 1000:6.1f}ms {p99 * 1000:6.1f}ms"
                f" {max(during) * 1000:6.1f}ms   {quantile(idle, 0.5) * 1000:6.1f}ms /"
                f" {idle_p99 * 1000:6.1f}ms   {p99 / idle_p99:5.1f}x   ({len(during)} probes)",
                flush=True,
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="attack and baseline windows per attack (default 3)"
    )
    parser.add_argument("--only", help="comma-separated parts of attack names to run (default: all)")
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.only.split(",") if args.only else None))
