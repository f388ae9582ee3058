"""Entry script of the sandbox child, run as ``python -I -S _child.py`` (never imported).

It must not import ``fleet_sdk``: that would pull in httpx and read the project's files. It
registers this directory as a bare package (without running ``__init__``, which needs
pydantic) so the stdlib-only modules beside it can import each other relatively, then hands
over to :func:`_runner.main`. Once the result is written it exits at once (``os._exit``).

Every run is a fresh interpreter, so its imports are a good part of a run's CPU: the cyclic
garbage collector is off while the runner's modules load (nearly all they make is kept; the
little cyclic garbage they leave is collected once it is on again, before the runner reads its
job). ``importlib`` is not imported: ``__import__`` does the same here.
"""

import gc
import os
import sys
import types

_PACKAGE = "_fleet_verifier_sandbox"


def _package(name: str, path: list[str]) -> None:
    package = types.ModuleType(name)
    package.__path__ = path
    sys.modules[name] = package


def _bootstrap() -> int:
    _package(_PACKAGE, [os.path.dirname(os.path.realpath(__file__))])
    # The verifier runtime's stdlib-only modules (argv[1]: fleet_sdk/verifiers), under their own names.
    _package("fleet_sdk", [])
    _package("fleet_sdk.verifiers", [sys.argv[1]])
    gc.disable()
    try:
        __import__(f"{_PACKAGE}._runner")
    finally:
        gc.enable()
    status: int = sys.modules[f"{_PACKAGE}._runner"].main()
    return status


if __name__ == "__main__":
    _status = _bootstrap()
    import contextlib  # here, not at the top: the runner loads it, with the collector off

    for _stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # the verifier may have closed it
            _stream.flush()
    # Leave now: do not wait for threads the verifier started or run its atexit handlers.
    os._exit(_status)
