"""``python -m codegen [--check] [--schemas DIR] [--out DIR] [--against REV]``.

Generates ``generated/fleet_generated``: everything codegen writes, and nothing else.

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
    PROJECT_ROOT,
    CodegenError,
    check,
    generate,
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
        "--out", type=Path, default=DEFAULT_OUT, help="the generated package dir (generated/fleet_generated)"
    )
    parser.add_argument(
        "--against",
        default="HEAD",
        help="git revision whose schemas the API changes are reported against (default: HEAD)",
    )
    args = parser.parse_args(argv)
    try:
        if args.check:
            diff = check(args.schemas, args.out)
            if diff:
                sys.stdout.write(diff)
                print(
                    f"\n{_display(args.out)} is out of date with {_display(args.schemas)}; "
                    "run `nox -s generate` (python -m codegen).",
                    file=sys.stderr,
                )
                return 1
            print(f"{_display(args.out)} is up to date with {_display(args.schemas)}.")
            return 0
        changed = [args.out / rel for rel in generate(args.schemas, args.out)]
    except (SpecError, CodegenError) as exc:
        print(f"codegen: error: {exc}", file=sys.stderr)
        return 2
    for path in changed:
        print(f"updated {_display(path)}")
    print(f"{_display(args.out)}: {len(changed)} file(s) changed.")
    _report_api_changes(args.schemas, args.against)
    return 0


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
