"""``fleet-sdk serve`` says exactly what a client sets, and those settings are enough.

The banner (stderr) and the JSON ready line (stdout) name ``FLEET_BASE_URL`` and ``FLEET_API_KEY``
(the key only when it was generated: a key the user chose is never printed); a client with those
two variables and nothing else reaches every surface of the server and nothing else.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from _serve import serving

from fleet_sdk import Fleet

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00" * 13


def test_a_generated_key_is_announced_with_the_base_url_and_they_suffice(tmp_path: Path) -> None:
    with serving(tmp_path) as (ready, stderr):
        client_env = ready["client_env"]
        assert client_env == {"FLEET_BASE_URL": ready["url"], "FLEET_API_KEY": ready["api_key"]}
        banner = stderr.read_text()
        assert f"clients set FLEET_BASE_URL={ready['url']} FLEET_API_KEY={ready['api_key']}" in banner
        with Fleet(environ=client_env) as fleet:  # these two variables and nothing else
            assert (fleet.config.platform_url, fleet.config.browser_url) == (ready["url"], ready["url"])
            job_id = fleet.traces.create_job("from the banner")
            data_url = "data:image/png;base64," + base64.b64encode(PNG).decode()
            history = [
                {"role": "user", "content": "look"},
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": data_url}}]},
            ]
            session_id = fleet.traces.upload_session(
                job_id=job_id, task_key="t", model="m", chat_history=history, reward=None
            )
            assert session_id is not None
            # --no-s3: the server names no bucket, so the screenshot stays a data URL (never production).
            assert fleet.api.control_plane.get_discovery().screenshots is None
            transcript = fleet.api.sessions.get_session_transcript(session_id).transcript
            assert data_url in json.dumps([message.model_dump(mode="json") for message in transcript])


def test_a_chosen_key_is_named_but_never_printed(tmp_path: Path) -> None:
    with serving(tmp_path, "--api-key", "chosen-key-123") as (ready, stderr):
        assert ready["client_env"] == {"FLEET_BASE_URL": ready["url"]}
        banner = stderr.read_text()
        assert f"clients set FLEET_BASE_URL={ready['url']} FLEET_API_KEY=<your --api-key>" in banner
        assert "chosen-key-123" not in banner
