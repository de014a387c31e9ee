"""``python -m cycled``: the SDK's version (``--version``)."""

from __future__ import annotations

import argparse
import sys

from . import __version__


def main(argv: list[str] | None = None) -> int:
    """Parses the command line; prints the version with --version, else the help."""
    p = argparse.ArgumentParser(prog="python -m cycled", description="The Python SDK of cycled, the cognitive-cycle tick scheduler.")
    p.add_argument("--version", action="version", version="cycled (Python SDK) %s" % __version__)
    p.parse_args(argv)
    p.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
