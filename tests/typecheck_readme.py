"""``python tests/typecheck_readme.py``: ``mypy --strict`` over the README's Python examples.

What a user writes from the README must type-check as written: each example is written to a
temporary directory as its own module and checked with the project's mypy settings. A static
check, run by ``.ci/run`` and ``nox -s typecheck``, not by pytest.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from _readme import README, python_examples


def main() -> int:
    examples = python_examples()
    with tempfile.TemporaryDirectory(prefix="fleet-readme-") as tmp:
        files = []
        for index, example in enumerate(examples):
            name = f"readme_example_{index}.py"
            (Path(tmp) / name).write_text(example.code, encoding="utf-8")
            print(f"{name}: {README.name} line {example.line}")
            files.append(name)
        config = str(README.parent / "pyproject.toml")
        command = [sys.executable, "-m", "mypy", "--strict", "--config-file", config, *files]
        return subprocess.run(command, cwd=tmp, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
