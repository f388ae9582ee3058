"""Context management for long episodes: truncated tool output and five tools to manage it.

A long-horizon agent cannot keep every tool result in its context. :class:`ContextManager`
keeps the whole episode and a smaller *live context* (what the model is shown):

- every tool output longer than ``max_output_chars`` is cut, with a note telling the model how
  to read the rest; the full text is kept and can be searched (``search_tool_output``) and
  paged (``view_tool_output``);
- ``manage_context(keep_recent_turns)`` drops old turns from the live context (never system
  messages, the messages before the first turn, or the latest turn) and says what it dropped;
- ``search_history(pattern)`` searches every message of the episode, dropped ones included;
- ``check_context`` reports the size of the live context.

A *turn* is one assistant message and the tool results that answer it. Patterns are Python
regular expressions; results are bounded (``max_matches``, excerpts of ``excerpt_chars``).
Token counts are estimated as characters / 4 unless a ``tokenizer`` callable is given.

``TaskEnv(..., context_tools=True)`` offers the tools to the model and runs them locally (no
instance call); the manager also works on its own::

    context = ContextManager(max_output_chars=4000)
    context.add_message({"role": "user", "content": "Audit the ledger."})
    context.add_message({"role": "assistant", "content": None, "tool_calls": [...]})
    shown = context.add_tool_result("call_1", "export_inventory_ledger", ledger_text)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._exceptions import ContextToolError

if TYPE_CHECKING:
    import regex
from .tools import Tool

__all__ = [
    "CONTEXT_TOOLS",
    "CONTEXT_TOOL_NAMES",
    "ContextManager",
    "OutputPage",
    "StoredOutput",
    "message_text",
]

DEFAULT_MAX_OUTPUT_CHARS = 20_000
DEFAULT_MAX_MATCHES = 20
DEFAULT_EXCERPT_CHARS = 200
# Room kept under max_output_chars for the truncation note and the page header.
_NOTE_ROOM = 400

MAX_PATTERN_CHARS = 1_000
"""Longest search pattern accepted (the model writes them)."""
MAX_SEARCH_CHARS = 5_000_000
"""Most characters one search scans; beyond them the result says ``scan_truncated``."""
SEARCH_TIMEOUT = 2.0
"""Seconds one search may run; a pattern that backtracks past it gets a tool error."""

_PATTERN = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_PATTERN_CHARS,
    "description": "A Python regular expression.",
}
_MAX_MATCHES = {
    "type": "integer",
    "minimum": 1,
    "maximum": 100,
    "description": f"Most matches to return (default {DEFAULT_MAX_MATCHES}).",
}

# Built without validation (literals of this module; tests/test_tool_shapes.py checks they are
# valid): validating would build Tool's schema when the SDK is imported, not when first used.
CONTEXT_TOOLS: list[Tool] = [
    Tool.model_construct(
        name="check_context",
        description="Report the size of your context: turns and messages kept, characters, estimated "
        "tokens, turns dropped so far, and the tool outputs that were truncated (with their ids).",
        input_schema={"type": "object", "properties": {}, "required": []},
    ),
    Tool.model_construct(
        name="manage_context",
        description="Drop old turns from your context to make room, keeping the most recent ones. "
        "System messages, the task prompt and the latest turn are always kept. Dropped turns stay "
        "searchable with search_history. Returns what was dropped.",
        input_schema={
            "type": "object",
            "properties": {
                "keep_recent_turns": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "How many of the most recent turns to keep (at least 1).",
                }
            },
            "required": ["keep_recent_turns"],
        },
    ),
    Tool.model_construct(
        name="search_history",
        description="Search every message of the episode, including turns dropped from your context, "
        "with a regular expression. Returns the turn, role and an excerpt of each match.",
        input_schema={
            "type": "object",
            "properties": {
                "pattern": _PATTERN,
                "max_matches": _MAX_MATCHES,
            },
            "required": ["pattern"],
        },
    ),
    Tool.model_construct(
        name="search_tool_output",
        description="Search the full text of tool outputs that were truncated, with a regular "
        "expression. Returns the output id, character offset, page and an excerpt of each match.",
        input_schema={
            "type": "object",
            "properties": {
                "pattern": _PATTERN,
                "output_id": {
                    "type": "string",
                    "description": "Only this output (e.g. 'out_3'); default: every truncated output.",
                },
                "max_matches": _MAX_MATCHES,
            },
            "required": ["pattern"],
        },
    ),
    Tool.model_construct(
        name="view_tool_output",
        description="Read one page of the full text of a truncated tool output. Pages are fixed "
        "character ranges: page N of size S covers characters (N-1)*S up to N*S.",
        input_schema={
            "type": "object",
            "properties": {
                "output_id": {
                    "type": "string",
                    "description": "The output to read (e.g. 'out_3'); default: the latest truncated one.",
                },
                "page": {"type": "integer", "minimum": 1, "description": "Page number, from 1."},
                "page_size": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Characters per page (default and maximum: what fits in one output).",
                },
            },
            "required": ["page"],
        },
    ),
]
CONTEXT_TOOL_NAMES = frozenset(tool.name for tool in CONTEXT_TOOLS)


def message_text(content: Any) -> str:
    """The text of message content: a string as is, content blocks' text joined, else JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(b, Mapping) and "type" in b for b in content):
        return "\n".join(str(b.get("text", "")) for b in content if b.get("type") == "text")
    return json.dumps(content, default=str)


@dataclass(frozen=True)
class StoredOutput:
    """The full text of one truncated tool output.

    Attributes:
        output_id: ``out_<n>``, the id the truncation note names.
        tool: The tool that produced it.
        tool_call_id: The call it answered.
        turn: The turn it belongs to.
        text: The full text (what the tool returned, as message text).
        shown_chars: How many leading characters the model was shown.
    """

    output_id: str
    tool: str
    tool_call_id: str
    turn: int
    text: str
    shown_chars: int


@dataclass(frozen=True)
class OutputPage:
    """One page of a stored output (see :meth:`ContextManager.view_tool_output`).

    Attributes:
        output_id: The output.
        page: Page number, from 1.
        pages: Number of pages at this page size.
        page_size: Characters per page.
        start: Offset of the first character.
        text: The page's characters, exactly as stored.
    """

    output_id: str
    page: int
    pages: int
    page_size: int
    start: int
    text: str

    def render(self) -> str:
        """One header line, then the page text verbatim."""
        end = self.start + len(self.text)
        return (
            f"[{self.output_id} page {self.page} of {self.pages}, characters {self.start}-{end}]\n{self.text}"
        )


@dataclass
class _Entry:
    message: dict[str, Any]
    turn: int  # 0: before the first assistant message
    dropped: bool = False


@dataclass
class ContextManager:
    """The history and live context of one episode, and the five context tools.

    Args:
        max_output_chars: Longest tool output the model is shown; longer ones are cut and stored.
        max_context_tokens: The model's budget, reported by ``check_context`` (None: not reported).
        tokenizer: Counts the tokens of a string (default: characters / 4).
        max_matches: Default cap on search matches.
        excerpt_chars: Characters of each search excerpt.
        offer_tools: Whether the model has the context tools (the truncation note names them).
    """

    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS
    max_context_tokens: int | None = None
    tokenizer: Callable[[str], int] | None = None
    max_matches: int = DEFAULT_MAX_MATCHES
    excerpt_chars: int = DEFAULT_EXCERPT_CHARS
    offer_tools: bool = True
    _entries: list[_Entry] = field(default_factory=list, init=False, repr=False)
    _outputs: dict[str, StoredOutput] = field(default_factory=dict, init=False, repr=False)
    _turn: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.max_output_chars < 2 * _NOTE_ROOM:
            raise ValueError(
                f"max_output_chars must be at least {2 * _NOTE_ROOM}, got {self.max_output_chars}"
            )

    # -- recording ------------------------------------------------------------------------------

    @property
    def turn(self) -> int:
        """The current turn (0 before the first assistant message)."""
        return self._turn

    def add_message(self, message: Mapping[str, Any]) -> None:
        """Record a message; an assistant message starts a new turn.

        Args:
            message: An OpenAI-shape message (``role``, ``content``, ``tool_calls``...).
        """
        if message.get("role") == "assistant":
            self._turn += 1
        self._entries.append(_Entry(dict(message), self._turn))

    def add_tool_result(self, tool_call_id: str, tool: str, content: Any) -> tuple[Any, bool]:
        """Record a tool result, cut to ``max_output_chars`` (the full text is kept).

        Args:
            tool_call_id: The call it answers.
            tool: The tool's name.
            content: The tool's value.

        Returns:
            ``(content the model is shown, whether it was truncated)``.
        """
        shown, truncated, message = self._fit(content, tool, tool_call_id)
        self.add_message({"role": "tool", "tool_call_id": tool_call_id, "content": message})
        return shown, truncated

    def fit(self, content: Any, *, tool: str, tool_call_id: str) -> tuple[Any, bool]:
        """``content`` cut to ``max_output_chars`` with a note, storing the full text when cut.

        Content blocks with images are kept (their long text blocks are cut); anything else is
        measured as message text.

        Args:
            content: A tool's value.
            tool: The tool's name.
            tool_call_id: The call it answers.
        """
        shown, truncated, _ = self._fit(content, tool, tool_call_id)
        return shown, truncated

    def _fit(self, content: Any, tool: str, tool_call_id: str) -> tuple[Any, bool, Any]:
        """``fit``, plus the tool message's content, so a value is serialised to JSON only once."""
        if (
            isinstance(content, list)
            and content
            and all(isinstance(b, Mapping) and "type" in b for b in content)
        ):
            any_cut = False
            blocks: list[Any] = []
            for block in content:
                text = block.get("text") if block.get("type") == "text" else None
                if isinstance(text, str) and len(text) > self.max_output_chars:
                    blocks.append({**block, "text": self._cut(text, tool, tool_call_id)})
                    any_cut = True
                else:
                    blocks.append(block)
            return blocks, any_cut, blocks
        text = message_text(content)
        if len(text) <= self.max_output_chars:
            # message_text already is the message's JSON, except for None and [] (empty text)
            empty = content is None or (isinstance(content, list) and not content)
            return content, False, _as_message(content) if empty else text
        cut = self._cut(text, tool, tool_call_id)
        return cut, True, cut

    def _cut(self, text: str, tool: str, tool_call_id: str) -> str:
        output_id = f"out_{len(self._outputs) + 1}"
        shown = self.max_output_chars - _NOTE_ROOM
        self._outputs[output_id] = StoredOutput(output_id, tool, tool_call_id, self._turn, text, shown)
        if self.offer_tools:
            how = (
                f'Read the rest with view_tool_output(output_id="{output_id}", page=2, page_size={shown}) '
                f'or search it with search_tool_output(pattern=..., output_id="{output_id}").'
            )
        else:
            how = "The rest is not shown."
        note = (
            f"\n\n[Output truncated: showing the first {shown} of {len(text)} characters ({output_id}). "
            f"{how}]"
        )
        return text[:shown] + note

    # -- views ------------------------------------------------------------------------------------

    @property
    def history(self) -> list[dict[str, Any]]:
        """Every message of the episode, dropped ones included."""
        return [entry.message for entry in self._entries]

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The live context: the messages the model is shown."""
        return [entry.message for entry in self._entries if not entry.dropped]

    @property
    def outputs(self) -> list[StoredOutput]:
        """The stored full texts of truncated outputs, oldest first."""
        return list(self._outputs.values())

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text``: the tokenizer's count, else characters / 4 rounded up.

        Args:
            text: The text.
        """
        return self.tokenizer(text) if self.tokenizer is not None else -(-len(text) // 4)

    # -- the five tools ---------------------------------------------------------------------------

    def check_context(self) -> dict[str, Any]:
        """Size of the live context and what is stored outside it."""
        live = self.messages
        chars = sum(len(message_text(m.get("content"))) + len(_calls_text(m)) for m in live)
        tokens = sum(self.count_tokens(message_text(m.get("content")) + _calls_text(m)) for m in live)
        live_turns = self._live_turns()
        dropped_turns = {e.turn for e in self._entries if e.dropped}
        report: dict[str, Any] = {
            "visible_turns": len(live_turns),
            "total_turns": self._turn,
            "dropped_turns": len(dropped_turns),
            "messages": len(live),
            "chars": chars,
            "estimated_tokens": tokens,
            "max_output_chars": self.max_output_chars,
            "truncated_outputs": [
                {"output_id": o.output_id, "tool": o.tool, "turn": o.turn, "chars": len(o.text)}
                for o in list(self._outputs.values())[-self.max_matches :]
            ],
        }
        if self.max_context_tokens is not None:
            report["max_context_tokens"] = self.max_context_tokens
            report["remaining_tokens"] = self.max_context_tokens - tokens
        return report

    def manage_context(self, keep_recent_turns: int) -> dict[str, Any]:
        """Drop all but the ``keep_recent_turns`` most recent turns from the live context.

        Args:
            keep_recent_turns: Turns to keep (at least 1: the latest turn is never dropped).

        Returns:
            ``{"dropped_turns": [...], "dropped_messages", "kept_turns", "dropped": [{turn, tools}]}``.
        """
        if isinstance(keep_recent_turns, bool) or not isinstance(keep_recent_turns, int):
            raise ContextToolError(f"keep_recent_turns must be an integer, got {keep_recent_turns!r}")
        if keep_recent_turns < 1:
            raise ContextToolError(f"keep_recent_turns must be at least 1, got {keep_recent_turns}")
        first_kept = self._turn - keep_recent_turns + 1
        dropped: dict[int, list[str]] = {}
        count = 0
        for entry in self._entries:
            if entry.dropped or entry.turn == 0 or entry.turn >= first_kept:
                continue
            if entry.message.get("role") == "system":
                continue
            entry.dropped = True
            count += 1
            tools = dropped.setdefault(entry.turn, [])
            for call in entry.message.get("tool_calls") or []:
                tools.append(str(call.get("function", {}).get("name")))
        kept = len(self._live_turns())
        return {
            "dropped_turns": sorted(dropped),
            "dropped_messages": count,
            "kept_turns": kept,
            "dropped": [{"turn": t, "tools": dropped[t]} for t in sorted(dropped)][-self.max_matches :],
        }

    def search_history(self, pattern: str, max_matches: int | None = None) -> dict[str, Any]:
        """Search every message of the episode (dropped ones included).

        Args:
            pattern: A Python regular expression.
            max_matches: Most matches to return (default ``max_matches``).
        """
        regex = _compile(pattern)
        limit = self._limit(max_matches)
        matches: list[dict[str, Any]] = []
        total = 0
        scan = _Scan(pattern)
        for entry in self._entries:
            text = message_text(entry.message.get("content")) + _calls_text(entry.message)
            for found in scan.finditer(regex, text):
                total += 1
                if len(matches) < limit:
                    matches.append(
                        {
                            "turn": entry.turn,
                            "role": entry.message.get("role"),
                            "dropped": entry.dropped,
                            "excerpt": self._excerpt(text, found),
                        }
                    )
        return {"pattern": pattern, "total_matches": total, "matches": matches, **scan.note()}

    def search_tool_output(
        self, pattern: str, output_id: str | None = None, max_matches: int | None = None
    ) -> dict[str, Any]:
        """Search the full text of truncated tool outputs.

        Args:
            pattern: A Python regular expression.
            output_id: Only this output (default: all of them).
            max_matches: Most matches to return (default ``max_matches``).
        """
        regex = _compile(pattern)
        limit = self._limit(max_matches)
        outputs = [self._output(output_id)] if output_id is not None else list(self._outputs.values())
        matches: list[dict[str, Any]] = []
        total = 0
        scan = _Scan(pattern)
        for output in outputs:
            for found in scan.finditer(regex, output.text):
                total += 1
                if len(matches) < limit:
                    page_size = output.shown_chars
                    matches.append(
                        {
                            "output_id": output.output_id,
                            "tool": output.tool,
                            "offset": found.start(),
                            "page": found.start() // page_size + 1,
                            "page_size": page_size,
                            "truncated_part": found.start() >= output.shown_chars,
                            "excerpt": self._excerpt(output.text, found),
                        }
                    )
        return {"pattern": pattern, "total_matches": total, "matches": matches, **scan.note()}

    def view_tool_output(
        self, page: int = 1, page_size: int | None = None, output_id: str | None = None
    ) -> OutputPage:
        """One page of a truncated output's full text; pages are fixed character ranges.

        Args:
            page: Page number, from 1.
            page_size: Characters per page (default and maximum: the shown length, so a page fits
                in one tool output).
            output_id: The output (default: the latest truncated one).
        """
        if output_id is None:
            if not self._outputs:
                raise ContextToolError("no tool output has been truncated yet")
            output_id = next(reversed(self._outputs))
        output = self._output(output_id)
        largest = self.max_output_chars - _NOTE_ROOM
        size = largest if page_size is None else page_size
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= largest:
            raise ContextToolError(f"page_size must be an integer from 1 to {largest}, got {page_size!r}")
        pages = max(1, -(-len(output.text) // size))
        if isinstance(page, bool) or not isinstance(page, int) or not 1 <= page <= pages:
            raise ContextToolError(f"page must be an integer from 1 to {pages} for {output_id}, got {page!r}")
        start = (page - 1) * size
        return OutputPage(output_id, page, pages, size, start, output.text[start : start + size])

    async def acall(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """``call`` for async code: searches run in a worker thread so the event loop keeps going.

        A search is bounded by ``SEARCH_TIMEOUT`` (the regex engine stops itself and releases
        the GIL while matching, so the thread ends too) and by ``MAX_SEARCH_CHARS``.

        Args:
            name: One of ``CONTEXT_TOOL_NAMES``.
            arguments: The call's arguments.

        Raises:
            ContextToolError: As ``call``, or a search that ran past its deadline.
        """
        if name not in _SEARCH_TOOLS:
            return self.call(name, arguments)
        import anyio

        try:
            with anyio.fail_after(SEARCH_TIMEOUT + 1.0):  # backstop; the engine's own timeout fires first
                return await anyio.to_thread.run_sync(self.call, name, arguments, abandon_on_cancel=True)
        except TimeoutError:
            raise ContextToolError(_timeout_message(arguments.get("pattern"))) from None

    def call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """Run a context tool by name, as the model called it.

        Args:
            name: One of ``CONTEXT_TOOL_NAMES``.
            arguments: The call's arguments.

        Raises:
            ContextToolError: An unknown tool or argument, or a bad value (the message says which).
        """
        known = {tool.name: tool for tool in CONTEXT_TOOLS}
        if name not in known:
            raise ContextToolError(f"{name!r} is not a context tool; expected one of {sorted(known)}")
        allowed = set(known[name].input_schema["properties"])
        unknown = sorted(set(arguments) - allowed)
        if unknown:
            raise ContextToolError(f"{name}() got unknown argument(s) {unknown}; it takes {sorted(allowed)}")
        missing = [a for a in known[name].input_schema["required"] if a not in arguments]
        if missing:
            raise ContextToolError(f"{name}() is missing required argument(s) {missing}")
        args = dict(arguments)
        if name == "check_context":
            return self.check_context()
        if name == "manage_context":
            return self.manage_context(args["keep_recent_turns"])
        if name == "search_history":
            return self.search_history(args["pattern"], args.get("max_matches"))
        if name == "search_tool_output":
            return self.search_tool_output(args["pattern"], args.get("output_id"), args.get("max_matches"))
        return self.view_tool_output(args["page"], args.get("page_size"), args.get("output_id")).render()

    # -- helpers ----------------------------------------------------------------------------------

    def _live_turns(self) -> set[int]:
        """Turns whose assistant message is still in the live context."""
        entries = self._entries
        return {
            e.turn for e in entries if not e.dropped and e.turn > 0 and e.message.get("role") == "assistant"
        }

    def _output(self, output_id: str) -> StoredOutput:
        output = self._outputs.get(output_id) if isinstance(output_id, str) else None
        if output is None:
            known = list(self._outputs)[-10:]
            raise ContextToolError(f"unknown output_id {output_id!r}; truncated outputs: {known or 'none'}")
        return output

    def _limit(self, max_matches: int | None) -> int:
        if max_matches is None:
            return self.max_matches
        if isinstance(max_matches, bool) or not isinstance(max_matches, int) or not 1 <= max_matches <= 100:
            raise ContextToolError(f"max_matches must be an integer from 1 to 100, got {max_matches!r}")
        return max_matches

    def _excerpt(self, text: str, found: regex.Match[str]) -> str:
        half = self.excerpt_chars // 2
        start = max(0, found.start() - half)
        end = min(len(text), max(found.end(), found.start() + 1) + half)
        end = min(end, start + self.excerpt_chars + (found.end() - found.start()))
        return text[start:end][: 2 * self.excerpt_chars]


_SEARCH_TOOLS = frozenset({"search_history", "search_tool_output"})


def _timeout_message(pattern: Any) -> str:
    return (
        f"search for {pattern!r} ran past its {SEARCH_TIMEOUT:g}s limit (the pattern backtracks "
        "too much); use a simpler or more specific pattern"
    )


class _Scan:
    """One search's budget: ``SEARCH_TIMEOUT`` seconds and ``MAX_SEARCH_CHARS`` characters."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.ends = time.monotonic() + SEARCH_TIMEOUT
        self.left = MAX_SEARCH_CHARS
        self.truncated = False

    def finditer(self, compiled: regex.Pattern[str], text: str) -> Iterator[regex.Match[str]]:
        if len(text) > self.left:
            text, self.truncated = text[: self.left], True
        self.left -= len(text)
        timeout = max(0.001, self.ends - time.monotonic())
        try:
            yield from compiled.finditer(text, concurrent=True, timeout=timeout)
        except TimeoutError:
            raise ContextToolError(_timeout_message(self.pattern)) from None

    def note(self) -> dict[str, Any]:
        return {"scan_truncated": True, "scanned_chars": MAX_SEARCH_CHARS} if self.truncated else {}


def _compile(pattern: Any) -> regex.Pattern[str]:
    # ``regex`` (re-compatible V0 syntax) rather than ``re``: it can stop a match at a timeout and
    # releases the GIL while matching, so a backtracking pattern neither hangs nor blocks the loop.
    import regex

    if not isinstance(pattern, str) or not pattern:
        raise ContextToolError(f"pattern must be a non-empty string, got {pattern!r}")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ContextToolError(f"pattern must be at most {MAX_PATTERN_CHARS} characters, got {len(pattern)}")
    try:
        return regex.compile(pattern, flags=regex.V0)
    except regex.error as exc:
        raise ContextToolError(f"invalid regular expression {pattern!r}: {exc}") from None


def _calls_text(message: Mapping[str, Any]) -> str:
    calls = message.get("tool_calls") or []
    return "".join(
        f"\n{c.get('function', {}).get('name')}({c.get('function', {}).get('arguments')})" for c in calls
    )


def _as_message(content: Any) -> Any:
    """Tool-message content: strings and content blocks as they are, anything else as JSON text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content and all(isinstance(b, Mapping) and "type" in b for b in content):
        return content
    return json.dumps(content, default=str)
