"""The MCP endpoint decides what a request is from the JSON the request gate decoded, and decodes
the body itself when the gate did not (a ``Content-Type`` that is not JSON, an empty or ``null``
body): either way the request reaches the same answer.

The endpoint used to decode every body itself, up to four times; it now takes the gate's value
(``CHECKED_BODY``) when there is one. These requests have none, so they pin the fallback: an
``initialize`` or a ``tools/call`` sent as ``text/plain`` is still the package's to answer (it
refuses the type) while the same call as JSON takes the short path, and a ``null`` body, with a
session or without, is still the package's JSON-RPC error.
"""

from __future__ import annotations

import httpx

from fleet_sdk.types import env_instance as models

REVISION = "2025-11-25"
INITIALIZE = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    b'"capabilities":{},"clientInfo":{"name":"t","version":"0"}}}'
)
ACCEPT = "application/json, text/event-stream"
CALL_PARAMS = b'"params":{"name":"get_order","arguments":{"order_id":1012}}}'


async def test_bodies_the_gate_did_not_decode_get_the_same_answers(instance: models.InstanceResponse) -> None:
    assert instance.urls is not None
    url = f"{instance.urls.root}mcp"
    async with httpx.AsyncClient(timeout=30) as http:
        # Not JSON by its type: the gate passes it through undecoded and the endpoint decodes it,
        # finds an initialize and hands it to the session manager, which refuses the type.
        plain = await http.post(
            url, content=INITIALIZE, headers={"accept": ACCEPT, "content-type": "text/plain"}
        )
        assert plain.status_code == 400 and "mcp-session-id" not in plain.headers
        opened = await http.post(
            url, content=INITIALIZE, headers={"accept": ACCEPT, "content-type": "application/json"}
        )
        assert opened.status_code == 200
        headers = {
            "accept": ACCEPT,
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": REVISION,
        }
        done = await http.post(
            url,
            content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
            headers={**headers, "content-type": "application/json"},
        )
        assert done.status_code == 202
        call = b'{"jsonrpc":"2.0","id":2,"method":"tools/call",' + CALL_PARAMS
        # The same call as text/plain is the package's to refuse; as JSON, the short path answers.
        refused = await http.post(url, content=call, headers={**headers, "content-type": "text/plain"})
        assert refused.status_code == 400
        answered = await http.post(url, content=call, headers={**headers, "content-type": "application/json"})
        assert answered.status_code == 200 and answered.json()["result"]["isError"] is False
        # A JSON null (the gate's value is None, so the endpoint decodes it again), on the session
        # and without one: the package's JSON-RPC error either way.
        for extra in (headers, {"accept": ACCEPT}):
            null = await http.post(
                url, content=b"null", headers={**extra, "content-type": "application/json"}
            )
            assert null.status_code == 400 and null.json()["error"]["code"] == -32602, null.text
        await http.delete(url, headers=headers)
