"""`gqa trigger add|list|remove`: submit a job when objects land in S3.

A trigger watches s3://BUCKET/PREFIX (optionally only keys ending in a
suffix); a burst of objects within the debounce window submits one job, with
the keys in GQA_TRIGGER_KEYS. The job's directory is bundled and uploaded
when the trigger is added, as `gqa submit` does (cli/code.py), and every
burst's job runs that code. Triggers run on the AWS backend only."""

import sys
from typing import Annotated, Optional

import typer

from .app import app as gqa
from .context import caller_user
from .options import Output, check_output
from .output import console, note, print_json, user_errors

app = typer.Typer(help="Submit a job when objects land in S3 (AWS backend).", no_args_is_help=True)
gqa.add_typer(app, name="trigger")
Opt = typer.Option


@app.command("add")
def add(
    bucket: Annotated[str, Opt("--bucket", "-b", help="The S3 bucket to watch.", show_default=False)],
    prefix: Annotated[str, Opt("--prefix", "-p", help="Only keys under this prefix (\"\" for the whole bucket).",
                               show_default=False)],
    job: Annotated[str, Opt("--job", "-j", help="The job to submit: a job file (.yaml) or a script with #GQA "
                                                "lines.", show_default=False)],
    suffix: Annotated[Optional[str], Opt("--suffix", "-s", help="Only keys ending in this, e.g. .parquet.")] = None,
    debounce: Annotated[str, Opt("--debounce", "-d", help="Objects within this window of the first make one "
                                                          "job: 90s, 2m, up to 15m.")] = "2m",
    no_code: Annotated[bool, Opt("--no-code", help="Send no code; the image holds it.")] = False,
    code_max_size: Annotated[str, Opt("--code-max-size", help="The largest code bundle, compressed.")] = "100Mi",
    output: Output = "table",
):
    """Watch a bucket prefix; each burst of new objects submits the job once, owned by you.

    The job's directory goes with it, as with gqa submit: uploaded now, kept while the trigger exists.

    Example: gqa trigger add --bucket data --prefix incoming/ --suffix .parquet --job retrain.yaml
    """
    fmt = check_output(output)
    with user_errors():
        from gqa.models.loader import load_spec
        from gqa.models.trigger import parse_debounce
        from gqa.models.units import parse_size

        from .backend import backend
        from .code import for_backend, with_code

        be = backend()
        triggers = be.triggers()   # the local backend refuses here, before anything else
        seconds = parse_debounce(debounce)
        spec = load_spec(job, warn=note)   # a bad file fails here, with its file:line
        spec = for_backend(spec, be)
        if no_code:   # the image holds the code, whatever bundle the file names
            spec = spec.model_copy(update={"code": None})
        else:   # the code as it is now: every burst runs it, however long after
            spec = with_code(spec, be, max_bytes=parse_size(code_max_size), say=note if fmt == "table" else None)
        trigger = triggers.add(bucket, prefix, spec.model_dump_json(), caller_user() or spec.owner, seconds,
                               suffix=suffix)
    if fmt == "json":
        print_json(_row(trigger))
        return
    sys.stdout.write(trigger.id + "\n")
    note(f"watching {trigger.describe()}: a burst of objects within {_window(trigger.debounce)} submits "
         f"{spec.name!r} once")
    note(f"  gqa trigger list    gqa trigger remove {trigger.id}")


@app.command("list")
def list_(
    owner: Annotated[Optional[str], Opt("--owner", "-u", help="Only this owner's triggers.")] = None,
    mine: Annotated[bool, Opt("--mine", help="Only your triggers.")] = False,
    output: Output = "table",
):
    """Every trigger: what it watches, its window, its job and owner (-o json adds when it was added)."""
    fmt = check_output(output)
    with user_errors():
        from .backend import backend

        be = backend()
        service = be.triggers()   # the local backend refuses here
        if mine:   # on AWS, who you are is your IAM identity, as the API sees it
            owner = caller_user() or be.whoami()["owner"]
        triggers = service.list(owner=owner)
    rows = [_row(t) for t in triggers]
    if fmt == "json":
        print_json({"triggers": rows})
        return
    if not rows:
        note("no triggers; add one with `gqa trigger add --bucket B --prefix P --job FILE`")
        return
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for col in ("id", "watches", "window", "job", "owner"):
        # a pattern is copied from here: never cut short, folded if the terminal is narrow
        table.add_column(col, overflow="fold" if col == "watches" else "ellipsis")
    for t, r in zip(triggers, rows):
        table.add_row(r["id"], t.describe(), _window(r["debounce"]), r["job"], r["owner"])
    console().print(table)


@app.command("remove")
def remove(
    trigger_id: Annotated[str, typer.Argument(metavar="ID", help="The trigger's id (tr-...).", show_default=False)],
    output: Output = "table",
):
    """Stop a trigger (yours, unless you are an admin). An open burst is dropped with it."""
    fmt = check_output(output)
    with user_errors():
        from .backend import backend

        trigger = backend().triggers().remove(trigger_id)
    if fmt == "json":
        print_json(dict(_row(trigger), action="removed"))
    else:
        sys.stdout.write(f"removed {trigger.id} ({trigger.describe()})\n")


def _row(trigger) -> dict:
    import json

    data = trigger.to_dict()
    data["job"] = json.loads(trigger.spec_json).get("name", "")
    return data


def _window(seconds: int) -> str:
    from gqa.models.units import format_duration

    return format_duration(seconds)
