"""`tgs-entrypoint`: the POSIX sh wrapper tools/tgs-entrypoint, runnable from the host too.

In containers the script itself is mounted at /usr/local/bin/tgs-entrypoint (no Python
needed there); `tgs-entrypoint --path` prints where it is on the host."""

from __future__ import annotations

import os
import sys

from tgs.version import version

from .injection import ENTRYPOINT

PROG = "tgs-entrypoint"
USAGE = f"""usage: {PROG} [--] CMD [ARGS...]
       {PROG} --path | --version | --help

Runs CMD with the TGS shim preloaded ($TGS_SHIM, default /usr/local/lib/tgs/libtgs.so) when
that file exists; without it CMD runs unchanged. In a container the POSIX sh script itself is
the entrypoint (no Python needed); on the host this runs it.

  --path     print the script's path on the host (to mount it into a container)
  --version  print the version
  --         end of options (a CMD whose name starts with '-')"""


def main() -> None:
    # only a lone option is ours: `tgs-entrypoint CMD --help` passes --help on to CMD
    args = sys.argv[1:]
    if args in (["--help"], ["-h"]):
        print(USAGE)
        return
    if args == ["--version"]:
        print(f"{PROG} {version()}")
        return
    if args == ["--path"]:
        print(ENTRYPOINT)
        return
    os.execv("/bin/sh", ["/bin/sh", str(ENTRYPOINT), *args])
