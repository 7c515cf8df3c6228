"""Entry points whose issue has not landed yet say so instead of failing obscurely."""

import sys


def not_yet(command: str) -> int:
    print(f"{command}: not yet implemented in this version", file=sys.stderr)
    return 2
