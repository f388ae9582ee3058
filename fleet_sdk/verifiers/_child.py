"""Entry script of the sandbox child, run as ``python -I -S _child.py`` (never imported).

It must not import ``fleet_sdk``: that would pull in httpx and read the project's files. It
registers this directory as a bare package (without running ``__init__``, which needs
pydantic) so the stdlib-only modules beside it can import each other relatively, then hands
over to :func:`_runner.main`.
"""

import importlib
import os
import sys
import types

_PACKAGE = "_fleet_verifier_sandbox"


def _bootstrap() -> int:
    package = types.ModuleType(_PACKAGE)
    package.__path__ = [os.path.dirname(os.path.realpath(__file__))]
    sys.modules[_PACKAGE] = package
    runner = importlib.import_module(f"{_PACKAGE}._runner")
    status: int = runner.main()
    return status


if __name__ == "__main__":
    sys.exit(_bootstrap())
