"""Every boolean option reads as a plain flag in --help (cli/options.py
plain_flags): `--explain`, never `<bool>`, `[default: False]` or a `--no-`
form, except where both forms mean something."""

import re
from typing import Annotated, Optional

import pytest
import typer
import typer.main

from cli.main import gqa_command, main
from cli.options import plain_flags

# both forms meaningful: set, unset, or leave the team's setting as it is
BOTH_FORMS = {("quota", "set"): {"--no-stop-at-budget"}}
# flags whose own name starts with --no-
NAMED_NO = {"--no-code"}


def commands(command, path=()):
    subs = getattr(command, "commands", {})
    if not subs:
        yield path
    for name, sub in subs.items():
        yield from commands(sub, (*path, name))


def help_of(capsys, path) -> str:
    capsys.readouterr()
    assert main([*path, "--help"]) == 0
    return capsys.readouterr().out


PATHS = list(commands(gqa_command()))


def test_the_walk_finds_every_command():
    assert ("submit",) in PATHS and ("quota", "set") in PATHS and ("local", "stop") in PATHS
    assert len(PATHS) > 25


@pytest.mark.parametrize("path", PATHS, ids=" ".join)
def test_no_boolean_option_reads_as_anything_but_a_flag(capsys, path):
    text = help_of(capsys, path)
    assert "<bool>" not in text
    assert "[default: False]" not in text and "[default: True]" not in text
    negatives = set(re.findall(r"--no-[\w-]+", text)) - NAMED_NO
    assert negatives <= BOTH_FORMS.get(path, set()), f"gqa {' '.join(path)}: {sorted(negatives)}"


def test_a_flag_shows_no_type_where_a_value_option_does(capsys):
    text = help_of(capsys, ("queue",))
    assert re.search(r"--explain\s+-x\s+Show", text)
    assert re.search(r"--output\s+-o\s+<str>", text)


def test_an_option_off_by_default_loses_its_no_form_and_a_three_way_one_keeps_it():
    app = typer.Typer()

    @app.command()
    def go(force: bool = typer.Option(False, help="Do it."),
           stop: Annotated[Optional[bool], typer.Option("--stop/--no-stop")] = None):
        print(force, stop)

    command = plain_flags(typer.main.get_command(app))
    names = {p.name: p for p in command.params}
    assert names["force"].opts == ["--force"] and names["force"].secondary_opts == []
    assert names["stop"].secondary_opts == ["--no-stop"]
    with pytest.raises(SystemExit) as refused:
        command(["--no-force"], standalone_mode=True)
    assert refused.value.code == 2
