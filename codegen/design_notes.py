"""Move schema design notes into ``x-design-note``: ``python -m codegen.design_notes FILE...``.

Descriptions become public docstrings; why the schema chose a behaviour (where the upstream
wire behaviour is unspecified) is for maintainers. For each ``description`` or ``summary``
holding a marker (``codegen.openapi.DESIGN_NOTE_MARKERS``), sentence by sentence:

- ``Design choice (why) - behaviour.`` keeps ``Behaviour.`` and notes the whole sentence;
- a parenthesis naming a marker is cut out and noted;
- any other sentence with a marker is moved to the note whole.

The note goes in an ``x-design-note`` key beside the description. The edit is textual
(the rest of the file keeps its bytes) and checked: the file must load to the same data
with only those keys changed. Running it twice changes nothing.
"""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import yaml

from .openapi import DESIGN_NOTE_KEY, DESIGN_NOTE_MARKERS

KEY_LINE = re.compile(r"^(?P<indent> *)(?P<dash>- )?(?P<key>description|summary): ?(?P<value>.*)$")
LABEL = re.compile(r"^Design choice(?: \([^)]*\))?\s*(?::|-)\s*(?P<rest>.+)$", re.DOTALL)
PAREN = re.compile(r"\s*\((?P<inner>[^()]*)\)")
SENTENCE_END = re.compile(r"(?<!e\.g\.)(?<!i\.e\.)(?<=[.!?])\s+(?=[A-Z`(\"])")
WIDTH = 96


def _has_marker(text: str) -> bool:
    lowered = text.lower()
    return any(marker in lowered for marker in DESIGN_NOTE_MARKERS)


def _upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def split_note(text: str) -> tuple[str, str]:
    """``(description, note)`` for one description; note is empty when there is none."""
    kept_paragraphs: list[str] = []
    notes: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text.strip()):
        kept: list[str] = []
        for sentence in SENTENCE_END.split(" ".join(paragraph.split())):
            if not _has_marker(sentence):
                kept.append(sentence)
                continue
            label = LABEL.match(sentence)
            if label:
                notes.append(sentence)
                if not _has_marker(label.group("rest")):
                    kept.append(_upper_first(label.group("rest")))
                continue
            cut = sentence
            for paren in PAREN.finditer(sentence):
                if _has_marker(paren.group("inner")):
                    notes.append(paren.group("inner"))
                    cut = cut.replace(paren.group(0), "")
            if cut != sentence and not _has_marker(cut):
                kept.append(cut)
            else:
                notes.append(sentence)
        if kept:
            kept_paragraphs.append(" ".join(kept))
    upstream = "the upstream wire reference"
    notes = [
        n.replace("PROTOCOL.md", upstream).replace("PROTOCOL", upstream).strip().rstrip(".") for n in notes
    ]
    note = " ".join(_upper_first(n) + "." for n in dict.fromkeys(notes))
    return "\n\n".join(kept_paragraphs), note


def _scalar_lines(key: str, text: str, column: int, *, block: bool, original: str = "") -> list[str]:
    pad = " " * column
    # Paragraphs the move did not touch keep their line breaks (smaller diffs).
    untouched = {" ".join(p.split()): p.strip("\n").split("\n") for p in re.split(r"\n\s*\n", original)}
    if not block and "\n" not in text:
        plain = f"{key}: {text}"
        if yaml.safe_load(plain) == {key: text} and len(pad) + len(plain) <= 140:
            return [pad + plain]
    lines = [f"{pad}{key}: |"]
    for index, paragraph in enumerate(text.split("\n\n")):
        if index:
            lines.append("")
        if paragraph in untouched:
            lines += [pad + "  " + line.strip() for line in untouched[paragraph]]
        else:
            lines += textwrap.wrap(
                paragraph, WIDTH - column - 2, initial_indent=pad + "  ", subsequent_indent=pad + "  "
            )
    return lines


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def transform_text(source: str) -> str:
    """The YAML text with every marked description split into description + ``x-design-note``."""
    lines = source.split("\n")
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        match = KEY_LINE.match(line)
        if not match:
            out.append(line)
            index += 1
            continue
        column = len(match.group("indent")) + (2 if match.group("dash") else 0)
        end = index + 1
        while end < len(lines) and (
            not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > column
        ):
            end += 1
        while end > index + 1 and not lines[end - 1].strip():
            end -= 1
        snippet = "\n".join(
            [f"{match.group('key')}: {match.group('value')}"] + [x[column:] for x in lines[index + 1 : end]]
        )
        value = yaml.safe_load(snippet)[match.group("key")]
        if not isinstance(value, str) or not _has_marker(value):
            out.extend(lines[index:end])
            index = end
            continue
        description, note = split_note(value)
        block = match.group("value").startswith(("|", ">"))
        first = _scalar_lines(match.group("key"), description, column, block=block, original=value)
        if match.group("dash"):
            first[0] = match.group("indent") + "- " + first[0][column:]
        out += first
        out += _scalar_lines(DESIGN_NOTE_KEY, note, column, block=block)
        index = end
    return "\n".join(out)


def _expected(data: Any) -> Any:
    if isinstance(data, dict):
        result = {}
        for key, value in data.items():
            if key in ("description", "summary") and isinstance(value, str) and _has_marker(value):
                description, note = split_note(value)
                result[key] = description
                result[DESIGN_NOTE_KEY] = note
            else:
                result[key] = _expected(value)
        return result
    if isinstance(data, list):
        return [_expected(item) for item in data]
    return data


def _normalise(data: Any) -> Any:
    # Block scalars end in a newline and wrap differently; compare words.
    if isinstance(data, dict):
        return {key: _normalise(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_normalise(item) for item in data]
    if isinstance(data, str):
        return " ".join(data.split())
    return data


def _report(got: Any, want: Any, where: str = "") -> None:
    if isinstance(got, dict) and isinstance(want, dict):
        for key in sorted(set(got) | set(want), key=str):
            _report(got.get(key), want.get(key), f"{where}/{key}")
    elif isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
        for index, (a, b) in enumerate(zip(got, want, strict=True)):
            _report(a, b, f"{where}/{index}")
    elif got != want:
        print(f"{where}: got {got!r}, want {want!r}", file=sys.stderr)


def _refuse_repeated_keys(node: yaml.Node | None) -> None:
    """A mapping with a repeated key (say a second ``x-design-note``) loads as the last one; refuse it."""
    if isinstance(node, yaml.MappingNode):
        keys = [key.value for key, _ in node.value if isinstance(key, yaml.ScalarNode)]
        repeated = sorted({key for key in keys if keys.count(key) > 1})
        if repeated:
            raise SystemExit(f"{node.start_mark}: repeated keys {repeated}; merge the notes by hand")
        for _, value in node.value:
            _refuse_repeated_keys(value)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _refuse_repeated_keys(item)


def transform_file(path: Path) -> bool:
    """Rewrite ``path`` in place; returns whether it changed. Raises if the check fails."""
    source = path.read_text(encoding="utf-8")
    result = transform_text(source)
    if result == source:
        return False
    _refuse_repeated_keys(yaml.compose(result, Loader=yaml.SafeLoader))
    expected = _normalise(_expected(yaml.safe_load(source)))
    if _normalise(yaml.safe_load(result)) != expected:
        _report(_normalise(yaml.safe_load(result)), expected)
        raise SystemExit(f"{path}: the textual edit does not match the data-level one; edit by hand")
    path.write_text(result, encoding="utf-8")
    return True


def main(argv: list[str]) -> int:
    for name in argv:
        if transform_file(Path(name)):
            print(f"moved design notes in {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
