"""A 200-turn episode with 1 MB tool outputs and the context tools, on the local server.

The model never sees more than ``max_output_chars`` of any output; what was cut can be found
(``search_tool_output``) and read back exactly (``view_tool_output``); turns dropped by
``manage_context`` stay searchable (``search_history``); the task still verifies.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

from fleet_local.environments import get_environment
from fleet_sdk import AsyncFleet
from fleet_sdk.context import message_text
from fleet_sdk.task_env import TaskEnv

MAX_OUTPUT_CHARS = 8000
TURNS = 200


def ledger_from_seed(tmp_path: Path) -> str:
    """The ledger the bundled tool returns on fresh data, computed without the server."""
    env = get_environment("orderdesk")
    conn = sqlite3.connect(env.build_seed(tmp_path / "seed.db"))
    try:
        return str(env.tool("export_inventory_ledger").call(conn, {"days": 365}))
    finally:
        conn.close()


async def test_200_turns_with_1mb_outputs_stay_under_the_limit_and_everything_is_recoverable(
    afleet: AsyncFleet, tmp_path: Path
) -> None:
    ledger = ledger_from_seed(tmp_path)
    assert len(ledger) > 1_000_000
    reference = re.search(r"Export reference: (INV-\d+-\d+)", ledger)
    assert reference is not None and reference.start() > MAX_OUTPUT_CHARS
    task = await afleet.tasks.get("orderdesk-ledger-reference")
    observed: list[Any] = []

    async with TaskEnv(
        task, fleet=afleet, context_tools=True, max_output_chars=MAX_OUTPUT_CHARS, max_steps=TURNS
    ) as env:

        async def turn(tool: str, **params: Any) -> Any:
            obs, _, done, info = await env.step_async({"tool": tool, "params": params})
            assert info["tool_error"] is None, info["tool_error"]
            observed.append(obs)
            assert done == (env.step_count == TURNS)
            return obs["content"]

        obs = await env.reset_async()
        names = {t["function"]["name"] for t in obs["tools"]}
        assert {
            "check_context",
            "manage_context",
            "search_history",
            "search_tool_output",
            "view_tool_output",
        } <= names

        # Turn 1: the export; the model sees its head and a note, not the reference at its end.
        shown = await turn("export_inventory_ledger", days=365)
        assert shown.startswith(ledger[:1000]) and reference[1] not in shown
        assert 'view_tool_output(output_id="out_1"' in shown
        # Turn 2: a lookup whose text will be dropped from the context later.
        customer = await turn("get_customer", customer_id=7)
        # Turn 3: the reference is found only in the cut part.
        found = await turn("search_tool_output", pattern=r"Export reference: INV-\d+-\d+", output_id="out_1")
        [match] = found["matches"]
        assert match["truncated_part"] is True and reference[0] in match["excerpt"]
        assert match["offset"] == reference.start()

        # Turns 4..: page the whole output back; the pages concatenate to the exact ledger.
        pages: list[str] = []
        page = 1
        while True:
            rendered = await turn("view_tool_output", output_id="out_1", page=page)
            header, _, text = rendered.partition("\n")
            total = int(re.match(r"\[out_1 page \d+ of (\d+),", header)[1])  # type: ignore[index]
            pages.append(text)
            if page == total:
                break
            page += 1
        assert "".join(pages) == ledger
        paged_turns = env.step_count

        # Fill the episode: more 1 MB exports, lookups and context checks.
        while env.step_count < TURNS - 5:
            kind = env.step_count % 10
            if kind == 0:
                await turn("export_inventory_ledger", days=365)
            elif kind % 3 == 0:
                await turn("check_context")
            else:
                await turn("list_orders", status="pending")
        report = await turn("check_context")
        assert report["total_turns"] == env.step_count
        assert report["truncated_outputs"][-1]["chars"] == len(ledger)

        dropped = await turn("manage_context", keep_recent_turns=3)
        assert dropped["dropped_turns"][:3] == [1, 2, 3] and dropped["kept_turns"] == 3
        live = env.messages(context=True)
        assert customer["email"] not in "".join(message_text(m.get("content")) for m in live)
        history = await turn("search_history", pattern=re.escape(customer["email"]))
        assert any(m["turn"] == 2 and m["dropped"] and m["role"] == "tool" for m in history["matches"])

        await turn("add_order_note", order_id=1012, body=f"Ledger export {reference[1]}")
        obs, reward, done, info = await env.step_async({"tool": "get_order", "params": {"order_id": 1012}})
        observed.append(obs)
        assert env.step_count == TURNS and done and info["done_reason"] == "max_steps"
        assert reward == 1.0, env.verifier_error

    assert paged_turns > 100  # the paging alone took more than half the episode
    assert len(observed) == TURNS
    sizes = [len(message_text(r["content"])) for o in observed for r in o["results"]]
    assert max(sizes) <= MAX_OUTPUT_CHARS
    assert sum(r["truncated"] for o in observed for r in o["results"]) >= 5
    tool_messages = [m for m in env.chat_history if m["role"] == "tool"]
    assert len(tool_messages) == TURNS
    assert all(len(message_text(m["content"])) <= MAX_OUTPUT_CHARS for m in tool_messages)
