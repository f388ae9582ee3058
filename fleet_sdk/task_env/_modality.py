"""What a task's modality changes in a ``TaskEnv`` episode (docs/wire.md#episodes).

- ``tool_use``: the instance's tools but ``computer``, plus ``submit_final_answer`` when the
  prompt names it; tool values are shown as they are.
- ``computer_use``: only the instance's ``computer`` tool; observations are images, the first a
  screenshot taken by ``reset``, each followed by a ``[Turn N/M]`` text block.
- ``browser_use``: the same, but the ``computer`` tool is a browser lease's on the instance's web
  UI: leased by the first ``reset``, kept across episodes (later resets show the start page
  again), its health check's screenshot the first observation, closed by ``close``.

Computer and browser use also get a longer instance TTL, and computer use the MCP image.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..env import filter_tools
from ..protocol import SUBMIT_FINAL_ANSWER, SUBMIT_TOOL

if TYPE_CHECKING:
    from .._client import AsyncFleet
    from ..browser import BrowserSession
    from ..env import AsyncEnv
    from ..tasks import Task
    from ..tools import Tool


class Modality:
    """The modality part of an episode: the tools offered, the first screen, where calls go and
    what the model is shown.

    Args:
        task: The task (its ``task_modality``, and its prompt for ``submit_final_answer``).

    Attributes:
        browser: The browser lease of a browser_use task (None before the first ``tools`` and
            after ``release_browser``).
    """

    def __init__(self, task: Task) -> None:
        self._task = task
        self.browser: BrowserSession | None = None

    @property
    def multimodal(self) -> bool:
        """Whether observations carry images (computer- or browser-use)."""
        return self._task.task_modality != "tool_use"

    def ttl(self, ttl_seconds: int | None) -> int | None:
        """The instance's (and lease's) TTL: the one given, else the multimodal default.

        Args:
            ttl_seconds: The TaskEnv's ``ttl_seconds``.
        """
        from ..browser import multimodal_ttl

        return multimodal_ttl(self._task.task_modality, ttl_seconds)

    def make_kwargs(self, make_kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """``make`` arguments: computer_use asks for the MCP image unless told otherwise.

        Args:
            make_kwargs: The TaskEnv's ``make_kwargs``.
        """
        from ..browser import computer_use_make_kwargs

        return computer_use_make_kwargs(self._task.task_modality, make_kwargs)

    def offers_submit(self) -> bool:
        """Whether ``submit_final_answer`` is offered: tool_use tasks whose prompt names it."""
        return self._task.task_modality == "tool_use" and SUBMIT_FINAL_ANSWER in self._task.prompt

    async def tools(
        self,
        fleet: Callable[[], AsyncFleet],
        env: AsyncEnv,
        *,
        ttl: int | None,
        call_deadline: float,
        browser_kwargs: Mapping[str, Any],
    ) -> list[Tool]:
        """The tools the modality offers on ``env`` (leasing the browser of a browser_use task).

        Args:
            fleet: Gives the client a browser is leased with (called only for browser_use).
            env: The episode's instance.
            ttl: The lease's TTL (``MULTIMODAL_TTL_SECONDS`` when None).
            call_deadline: Seconds per call, for the lease's start page.
            browser_kwargs: More arguments for ``BrowserSession.open``.

        Raises:
            ToolNotFoundError: A computer- or browser-use instance has no ``computer`` tool.
        """
        listed = await self._browser_tools(fleet, env, ttl, call_deadline, browser_kwargs)
        tools = filter_tools(listed or await env.mcp.list_tools(), self._task.task_modality)
        if self.offers_submit():
            tools = [*tools, SUBMIT_TOOL]
        return tools

    async def _browser_tools(
        self,
        fleet: Callable[[], AsyncFleet],
        env: AsyncEnv,
        ttl: int | None,
        call_deadline: float,
        browser_kwargs: Mapping[str, Any],
    ) -> list[Tool]:
        """For browser_use: lease a browser on the instance's web UI (or show it again); its tools.

        A failed start deletes the lease (``BrowserSession.open``) and raises.
        """
        if self._task.task_modality != "browser_use":
            return []
        from ..browser import MULTIMODAL_TTL_SECONDS, BrowserSession

        if self.browser is None:
            self.browser = await BrowserSession.open(
                fleet(),
                env,
                ttl_seconds=ttl or MULTIMODAL_TTL_SECONDS,
                call_deadline=call_deadline,
                **browser_kwargs,
            )
        else:
            await self.browser.show_start_page(call_deadline)
        return list(self.browser.tools)

    async def screenshot(self, env: AsyncEnv, *, call_deadline: float) -> Any:
        """The first screen of a multimodal episode, as the ``computer`` tool returns it.

        Args:
            env: The episode's instance.
            call_deadline: Seconds for the screenshot call.
        """
        if self.browser is not None:  # the health check's screenshot of the web UI
            return self.browser.screenshot
        return await env.call_tool("computer", {"action": "screenshot"}, deadline=call_deadline)

    async def call(self, env: AsyncEnv, name: str, arguments: dict[str, Any], *, deadline: float) -> Any:
        """Run an instance tool: on the browser lease when there is one, else on ``env``.

        Args:
            env: The episode's instance.
            name: The tool.
            arguments: Its arguments.
            deadline: Wall-clock seconds, retries included.

        Raises:
            MCPError: The call failed.
        """
        caller = self.browser.call_tool if self.browser is not None else env.call_tool
        return await caller(name, arguments, deadline=deadline)

    def shown(self, value: Any, *, step: int, max_steps: int) -> Any:
        """A tool value as the model sees it: multimodal observations end with the turn footer.

        Args:
            value: The value.
            step: Steps used so far.
            max_steps: The step budget.
        """
        if not self.multimodal:
            return value
        blocks = value if isinstance(value, list) else [{"type": "text", "text": str(value)}]
        return [*blocks, {"type": "text", "text": f"[Turn {step}/{max_steps}]"}]

    def release_browser(self) -> BrowserSession | None:
        """Hand over the browser lease to be closed (None without one); the next ``tools`` leases anew."""
        browser, self.browser = self.browser, None
        return browser
