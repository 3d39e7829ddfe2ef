"""A benchmark's runs from this checkout and from another revision of it, in
turns on the same machine: shared machines are noisy, so a figure is a ratio
of two runs made side by side, never a bare time."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def checkout(rev: str, into: Path) -> Path:
    """Revision `rev` of this repository's sources, written into `into` (git archive): ValueError
    where git cannot read it."""
    into.mkdir()
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev],
                                 capture_output=True, check=True, timeout=120).stdout
    except subprocess.CalledProcessError as exc:
        raise ValueError(f"--against: cannot read revision {rev} of this repository: "
                         f"{exc.stderr.decode().strip()}") from None
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True, timeout=120)
    return into


def run_snippet(code: str, sources: Path, *argv: object, what: str = "a run") -> dict:
    """`code` run in a fresh process that imports from `sources`: the JSON object its last line prints."""
    done = subprocess.run([sys.executable, "-c", code, *map(str, argv)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(sources)), cwd=sources, timeout=3600)
    if done.returncode:
        raise SystemExit(f"{what} from {sources} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def interleaved(measure: Callable[[Path], dict], base: Path | None, rounds: int) -> tuple[list[dict], list[dict]]:
    """`measure` from this checkout and, where `base` is given, from it, in turns, `rounds` times
    (once without a base)."""
    mine: list[dict] = []
    theirs: list[dict] = []
    for _ in range(rounds if base else 1):
        mine.append(measure(ROOT))
        if base:
            theirs.append(measure(base))
    return mine, theirs


def add_options(parser: argparse.ArgumentParser, what: str = "run") -> None:
    """--against, --rounds and -o, as each benchmark run side by side takes them."""
    parser.add_argument("--against", default=None, metavar="REV", help=f"a revision to {what} side by side")
    parser.add_argument("--rounds", type=int, default=1, help="with --against: interleaved rounds (median)")
    parser.add_argument("-o", "--output", choices=["text", "json"], default="text")


def sizes_of(parser: argparse.ArgumentParser, text: str) -> list[int]:
    """--sizes as whole numbers, comma-separated; a clear refusal (exit 2) for anything else."""
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--sizes takes whole numbers, not {text!r}")


def rows_by_size(parser: argparse.ArgumentParser, args: argparse.Namespace, sizes: list[int],
                 measure: Callable[..., dict], medians: tuple[str, ...], line: Callable[[dict, str | None], str],
                 prefix: str, theirs_last: tuple[str, ...] = (), size_key: str = "queued") -> int:
    """`measure(sources, size=size)` for each size, here and, with --against, at that revision in turns
    (--rounds times). A size's row is the last run's figures here and the size (as `size_key`), with
    the median of each of `medians` over the runs, and, where a revision ran beside, each median
    there and each of `theirs_last` from its last run (as against_<figure>), and, where the runs
    say which jobs they started, whether both started the same in every round. Text prints each
    row's `line` as it comes; JSON prints every row at the end."""
    rows = []
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        try:
            base = checkout(args.against, Path(tmp) / "base") if args.against else None
        except ValueError as exc:
            parser.error(str(exc))
        for size in sizes:
            mine, theirs = interleaved(partial(measure, size=size), base, args.rounds)
            row = dict(mine[-1], **{size_key: size}, **{k: statistics.median(r[k] for r in mine) for k in medians})
            if theirs:
                row.update({f"against_{k}": statistics.median(r[k] for r in theirs) for k in medians})
                row.update({f"against_{k}": theirs[-1][k] for k in theirs_last})
                if "starts" in row:
                    row["same_starts"] = all(r["starts"] == t["starts"] for r, t in zip(mine, theirs))
            rows.append(row)
            if args.output == "text":
                print(line(row, args.against), flush=True)
    if args.output == "json":
        print(json.dumps({"against": args.against, "rounds": args.rounds, "rows": rows}, indent=2))
    return 0
