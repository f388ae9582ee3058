"""``python -m fleet_local serve|demo ...``: ``fleet-sdk`` with this server's commands, found
without the entry point (so ``LocalFleet`` needs no installed package metadata)."""

import sys

from fleet_sdk.cli import main

from ._cli import add_commands

if __name__ == "__main__":  # walking the package's modules imports this one too
    sys.exit(main(command_sets=[add_commands]))
