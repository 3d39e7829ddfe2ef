"""`--`: for `gqa submit` what follows is the job's command, verbatim; for
every other command it ends the options as usual, so what follows are
arguments (ids), and a command that takes none refuses them."""

import pytest

from cli.main import command_name, split_trailing_command


@pytest.mark.parametrize("args, name", [
    (["cancel", "1", "--", "2"], "cancel"),
    (["--profile", "submit", "cancel", "--", "2"], "cancel"),
    (["--profile=lab", "-V", "submit", "--", "true"], "submit"),
    (["--", "submit", "true"], None),
    (["--profile"], None),
    ([], None),
])
def test_the_command_is_the_first_word_past_gqas_own_options(args, name):
    assert command_name(args) == name


@pytest.mark.parametrize("args, split", [
    (["submit", "--gpus", "2", "--", "echo", "--", "hi"], (["submit", "--gpus", "2"], ["echo", "--", "hi"])),
    (["submit", "--"], (["submit"], [])),
    (["submit", "job.yaml"], (["submit", "job.yaml"], None)),
    (["cancel", "1", "--", "2"], (["cancel", "1", "--", "2"], None)),
    (["whoami", "--", "rm", "-rf", "/"], (["whoami", "--", "rm", "-rf", "/"], None)),
])
def test_only_submit_takes_a_command_after_the_double_dash(args, split):
    assert split_trailing_command(args) == split


@pytest.mark.parametrize("args", [
    ("cancel", "1", "--", "2"),
    ("cancel", "--", "1", "2"),
    ("--profile", "default", "cancel", "--", "1", "2"),
])
def test_ids_after_the_double_dash_are_acted_on(cli, args):
    cli.json("submit", "--hold", "--", "true")
    cli.json("submit", "--hold", "--", "true")

    code, out, err = cli(*args)

    assert (code, out, err) == (0, "cancelled 1\ncancelled 2\n", "")
    assert {cli.store.get(ref).state.value for ref in ("1", "2")} == {"CANCELLED"}


def test_a_command_that_takes_no_arguments_refuses_words_after_the_double_dash(cli):
    code, out, err = cli("whoami", "--", "rm", "-rf", "/")

    assert (code, out) == (2, "")
    assert err == "gqa: error: Got unexpected extra argument(s) (rm -rf /) (`gqa whoami -h` for help)\n"


def test_submit_still_runs_what_follows_the_double_dash_verbatim(cli):
    cli.json("submit", "--name", "dashes", "--", "echo", "--", "--name", "x")

    assert cli.store.get("1").spec.command == ["echo", "--", "--name", "x"]
    assert cli.store.get("1").name == "dashes"
