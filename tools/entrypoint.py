"""`tgs-entrypoint`: the POSIX sh wrapper tools/tgs-entrypoint, runnable from the host too.

In containers the script itself is mounted at /usr/local/bin/tgs-entrypoint (no Python
needed there); `tgs-entrypoint --path` prints where it is on the host."""

from __future__ import annotations

import os
import sys

from .injection import ENTRYPOINT


def main() -> None:
    if sys.argv[1:] == ["--path"]:
        print(ENTRYPOINT)
        return
    os.execv("/bin/sh", ["/bin/sh", str(ENTRYPOINT), *sys.argv[1:]])
