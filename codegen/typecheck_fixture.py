"""``python -m codegen.typecheck_fixture``: ``mypy --strict`` on the fixture surface.

``tests/fixtures/schemas`` uses shapes the real schemas do not (204, header parameters,
``Literal`` queries, deprecated operations); this generates it into a temporary package and
type-checks it with the project's mypy settings. A static check, run by ``.ci/run`` and
``nox -s typecheck``, not by pytest.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from .generate import PROJECT_ROOT, render_all, write_tree

FIXTURE_SCHEMAS = PROJECT_ROOT / "tests" / "fixtures" / "schemas"


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="fleet-codegen-fixture-") as tmp:
        write_tree(render_all(FIXTURE_SCHEMAS), Path(tmp) / "fixture_api")
        config = str(PROJECT_ROOT / "pyproject.toml")
        command = [sys.executable, "-m", "mypy", "--strict", "--config-file", config, "fixture_api"]
        return subprocess.run(command, cwd=tmp, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
