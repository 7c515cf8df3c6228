"""The package version for every command's `--version`."""

from __future__ import annotations

from typing import Any

from . import __version__

DIST = "tgs"


def version() -> str:
    """The installed distribution's version (pyproject.toml), else the source tree's."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version(DIST)
    except PackageNotFoundError:
        return __version__


def version_option(prog: str) -> Any:
    """`--version` for a click command: `PROG VERSION`, exit 0 (looked up only when asked)."""
    import click

    def show(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value and not ctx.resilient_parsing:
            click.echo(f"{prog} {version()}")
            ctx.exit(0)

    return click.option("--version", is_flag=True, expose_value=False, is_eager=True,
                        callback=show, help="Print the version and exit.")
