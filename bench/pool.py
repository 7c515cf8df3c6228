"""Pool the paired runs of several `tgs-bench` invocations as one long run.

    python -m tgs.bench.pool RESULTS_DIR [RESULTS_DIR ...] [--max-steal F] [--json]

An A/B of two shims alternates sets of `--repeat N` runs; each set's repeat.md pools only its
own N runs, whose p99 at 60 % load moves more from set to set than the 5 % a target allows.
This pools every run found under the folders given (a folder's results.json, or its
run-*/results.json), prints the paired table of the pool and each figure's interval over
resampled runs (bench/resample.py), and with --max-steal leaves out the runs during which the
hypervisor took that share of the CPUs or more.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from tgs.bench import repeat


def _docs(folder: Path) -> list[dict[str, Any]]:
    """The results.json documents of one folder: its own, or those of its run-* folders."""
    paths = [folder / "results.json"] if (folder / "results.json").is_file() else \
        sorted(folder.glob("run-*/results.json"))
    docs = []
    for path in paths:
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise click.UsageError(f"{path}: not a tgs-bench results document ({e})") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("scenarios"), dict):
            raise click.UsageError(f"{path}: not a tgs-bench results document (no scenarios)")
        docs.append(doc)
    return docs


@click.command()
@click.argument("folders", nargs=-1, required=True,
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--max-steal", type=click.FloatRange(0.0, 1.0, min_open=True), default=None,
              help="leave out the runs with this share of host CPU steal or more (0.02: 2 %)")
@click.option("--json", "as_json", is_flag=True, help="one JSON document instead of Markdown")
def main(folders: tuple[Path, ...], max_steal: float | None, as_json: bool) -> None:
    docs: list[dict[str, Any]] = []
    for folder in folders:
        found = _docs(folder)
        if not found:
            raise click.UsageError(f"{folder}: no results.json in it or in its run-* folders")
        docs.extend(found)
    pool = repeat.pooled(docs, max_steal=max_steal)
    if not pool:
        raise click.UsageError(f"no paired runs (T7-T11) among the {len(docs)} runs found")
    left_out = repeat.stolen_runs(docs, max_steal) if max_steal is not None else []
    if as_json:
        click.echo(json.dumps({"runs": len(docs), "max_steal": max_steal, "left_out": left_out,
                               "pooled": pool}, indent=1))
        return
    text = repeat.pooled_markdown(pool, len(docs))
    if max_steal is not None and left_out:
        text += f"\nLeft out (host CPU steal of {100 * max_steal:.0f} % or more): " \
                f"{'; '.join(left_out)}.\n"
    click.echo(text, nl=False)


if __name__ == "__main__":
    main()
