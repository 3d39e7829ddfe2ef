"""Every read refuses a home with no queue, and leaves it as it found it: an
empty queue made by a look would stand in for a shared box's from then on."""

import json

import pytest

from cli.main import main


@pytest.fixture
def no_queue(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("GQA_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    return home


@pytest.mark.parametrize("command", [["cost"], ["top", "--once"], ["top", "-o", "json"], ["quota", "show"],
                                     ["quota", "policy"], ["local", "price"], ["local", "price", "--price", "2"]])
def test_a_read_where_no_queue_is_says_so_and_makes_none(no_queue, capsys, command):
    assert main(command) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"gqa: error: no queue at {no_queue}: `gqa local start` starts one there")
    assert not no_queue.exists()
    assert main(["queue"]) == 2     # and the next command finds none either


def test_the_page_is_not_served_where_no_queue_is(no_queue, capsys, monkeypatch):
    import cli.ui

    def listen(host, port):
        raise AssertionError("the page listened with no queue to show")

    monkeypatch.setattr(cli.ui, "_listen", listen)
    assert main(["ui", "--port", "0"]) == 2
    assert capsys.readouterr().err.startswith(f"gqa: error: no queue at {no_queue}: ")
    assert not no_queue.exists()


def test_a_quota_change_where_no_queue_is_makes_one_as_before(no_queue, capsys):
    """A change is no read: a team set before `gqa local start` holds from its first job."""
    assert main(["quota", "set", "nlp", "--max-gpus", "2"]) == 0
    assert (no_queue / "gqa.db").exists()
    capsys.readouterr()
    assert main(["quota", "show", "-o", "json"]) == 0
    teams = {t["team"]: t for t in json.loads(capsys.readouterr().out)["teams"]}
    assert teams["nlp"]["max_gpus"] == 2
