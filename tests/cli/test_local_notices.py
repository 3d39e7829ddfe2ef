"""gqa local start's notice settings: a mistake is one line on stderr, exit 2,
before anything is written; good ones reach the daemon as one JSON argument."""

import json
import os

import pytest

from cli.local import _notice_options


@pytest.fixture
def login(tmp_path):
    path = tmp_path / "smtp-login"
    path.write_text("gqa:s3cret:with-colon\n")
    os.chmod(path, 0o600)
    return path


@pytest.mark.parametrize("argv, words", [
    (["--smtp", "mail.example.org"], "--smtp 'mail.example.org': give HOST:PORT"),
    (["--smtp", "mail.example.org:99999", "--mail-from", "a@b.c"], "give HOST:PORT"),
    (["--smtp", "mail.example.org:25"], "--smtp needs --mail-from ADDRESS"),
    (["--webhook", "ftp://hooks.example.org/x"], "--webhook 'ftp://hooks.example.org/x': give an http://"),
    (["--smtp", "m:25", "--mail-from", "a@b.c", "--smtp-login-file", "missing"], "cannot read the SMTP login file"),
])
def test_bad_notice_settings_are_refused_before_anything_is_written(cli, argv, words):
    code, out, err = cli("local", "start", "--gpus", "1", *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and words in err, err
    assert len(cli.store.inventory().gpus) == 4      # the queue's GPUs as they were: nothing recorded


def test_a_login_file_others_may_read_is_refused(cli, login):
    os.chmod(login, 0o644)
    code, _, err = cli("local", "start", "--gpus", "1", "--smtp", "m:25", "--mail-from", "a@b.c",
                       "--smtp-login-file", str(login))
    assert code == 2 and f"chmod 600 {login}" in err


def test_good_settings_travel_as_one_json_argument_without_the_password(login, monkeypatch):
    monkeypatch.chdir(login.parent)
    flag, text = _notice_options(smtp="mail.example.org:587", mail_from="gqa@example.org", starttls=True,
                                 login_file=login.name, mail_domain="example.org", webhook=None, alerts_to=None)
    assert flag == "--notices" and "s3cret" not in text
    assert json.loads(text) == {"smtp": "mail.example.org:587", "mail_from": "gqa@example.org", "starttls": True,
                                "login_file": str(login), "mail_domain": "example.org"}
    assert _notice_options(smtp=None, mail_from=None, starttls=False, login_file=None, mail_domain=None,
                           webhook=None, alerts_to=None) == []
