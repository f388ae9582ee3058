"""``python -m codegen [--check] [--schemas DIR] [--out DIR] [--types-out DIR] [--against REV]``.

Generates ``fleet_sdk/_generated`` and the public ``fleet_sdk/types`` package beside it. With
another ``--out`` the types package is left alone unless ``--types-out`` names where it goes.

Generating also prints the API changes since ``--against`` (the previous commit by default),
breaking ones marked (``codegen/apidiff.py``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import apidiff
from .generate import (
    DEFAULT_OUT,
    DEFAULT_SCHEMAS,
    DEFAULT_TYPES_OUT,
    PROJECT_ROOT,
    CodegenError,
    check,
    check_types,
    generate,
    generate_types,
)
from .openapi import SpecError


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(PROJECT_ROOT))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codegen", description=__doc__)
    parser.add_argument(
        "--check",
        action="store_true",
        help="generate into a temporary directory and exit 1 with a diff if --out differs",
    )
    parser.add_argument("--schemas", type=Path, default=DEFAULT_SCHEMAS, help="directory of *.yaml schemas")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="the generated package dir (fleet_sdk/_generated)"
    )
    parser.add_argument(
        "--types-out",
        type=Path,
        default=None,
        help="the public types package dir (default: fleet_sdk/types, when --out is the default)",
    )
    parser.add_argument(
        "--against",
        default="HEAD",
        help="git revision whose schemas the API changes are reported against (default: HEAD)",
    )
    args = parser.parse_args(argv)
    # A generated tree elsewhere (tests, the fixture type check) must not rewrite the real types.
    types_out: Path | None = args.types_out
    if types_out is None and args.out.resolve() == DEFAULT_OUT:
        types_out = DEFAULT_TYPES_OUT
    try:
        if args.check:
            diff = check(args.schemas, args.out)
            if types_out is not None:
                diff += check_types(args.schemas, types_out)
            if diff:
                sys.stdout.write(diff)
                print(
                    f"\n{_trees(args.out, types_out)} out of date with {_display(args.schemas)}; "
                    "run `nox -s generate` (python -m codegen).",
                    file=sys.stderr,
                )
                return 1
            print(f"{_trees(args.out, types_out)} up to date with {_display(args.schemas)}.")
            return 0
        changed = [args.out / rel for rel in generate(args.schemas, args.out)]
        if types_out is not None:
            changed += [types_out / rel for rel in generate_types(args.schemas, types_out)]
    except (SpecError, CodegenError) as exc:
        print(f"codegen: error: {exc}", file=sys.stderr)
        return 2
    for path in changed:
        print(f"updated {_display(path)}")
    print(f"{_trees(args.out, types_out, verb=False)}: {len(changed)} file(s) changed.")
    _report_api_changes(args.schemas, args.against)
    return 0


def _trees(out: Path, types_out: Path | None, *, verb: bool = True) -> str:
    """``"<out> is"`` or ``"<out> and <types_out> are"`` (without the verb: just the names)."""
    if types_out is None:
        return f"{_display(out)} is" if verb else _display(out)
    names = f"{_display(out)} and {_display(types_out)}"
    return f"{names} are" if verb else names


def _report_api_changes(schemas: Path, against: str) -> None:
    """Print what the schemas change in the API since ``against`` (never fails generation)."""
    previous = apidiff.load_revision(schemas, against)
    if previous is None:
        print(f"API changes: {_display(schemas)} has no revision {against!r} to compare with.")
        return
    changes = apidiff.diff_schema_dirs(previous, apidiff.load_dir(schemas))
    sys.stdout.write(apidiff.format_changes(changes, f"{against} ({_display(schemas)})"))


if __name__ == "__main__":
    sys.exit(main())
