"""Per-request cost of the SDK runtime over loopback, against bare httpx to the same server."""

from __future__ import annotations

import argparse
import time

import httpx
from fleet_api.env_instance import models

from fleet_sdk.local import LocalFleet


def main(requests: int) -> None:
    with LocalFleet(s3=False) as local, local.fleet() as fleet:
        headers = {"Authorization": f"Bearer {local.api_key}"}
        url = f"{local.base_url}/v1/env/"
        with httpx.Client() as bare:
            for _ in range(50):
                bare.get(url, headers=headers)
                fleet.list_envs()
            started = time.perf_counter()
            for _ in range(requests):
                [models.Environment.model_validate(e) for e in bare.get(url, headers=headers).json()]
            baseline = (time.perf_counter() - started) / requests
        started = time.perf_counter()
        for _ in range(requests):
            fleet.api.control_plane.list_envs()
        sdk = (time.perf_counter() - started) / requests
        print(f"bare httpx + pydantic: {baseline * 1e6:8.1f} us/request")
        print(f"fleet_sdk runtime:     {sdk * 1e6:8.1f} us/request  = {sdk / baseline:5.2f}x baseline")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    main(parser.parse_args().requests)
