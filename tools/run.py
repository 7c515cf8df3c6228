"""`tgs-run` entry point (placeholder until its issue lands)."""

import sys

from tgs._stub import not_yet


def main() -> None:
    sys.exit(not_yet("tgs-run"))
