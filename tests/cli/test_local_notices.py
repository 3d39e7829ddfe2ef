"""gqa local start's notice settings: a mistake is one line on stderr, exit 2,
before anything is written; good ones reach the daemon in a file only its user
reads, named by one argument (a webhook's URL is a secret; a process's arguments
are not)."""

import json
import os
import stat

import pytest

from cli.local import _notice_options, _notice_settings
from gqa.adapters.local.notice_channels import NoticeSettings, read_settings, redacted
from gqa.adapters.local.paths import StatePaths
from gqa.models.errors import SpecError


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
    (["--webhook", "http://127.0.0.1:abc/hook"], "--webhook 'http://127.0.0.1:abc/hook': the URL's port must be"),
    # accepted before, and nothing was ever delivered: no SMTP server to mail through
    (["--mail-domain", "example.org"], "--mail-domain mails notices: it needs --smtp HOST:PORT"),
    (["--webhook", "https://hooks.example.org/T0", "--mail-domain", "example.org"], "--mail-domain mails notices"),
    (["--alerts-to", "ops@example.org"], "--alerts-to 'ops@example.org' is an address: it needs --smtp"),
    (["--webhook", "https://hooks.example.org/T0", "--alerts-to", "ops"], "--alerts-to 'ops' is a user name"),
    (["--alerts-to", "not a thing"], "--alerts-to 'not a thing': not an e-mail address"),
    (["--alerts-to", "mailto:ops@example.org"], "--alerts-to 'mailto:ops@example.org': give one e-mail address"),
    (["--alerts-to", "https://hooks.example.org:0/T0"], "--alerts-to 'https://hooks.example.org:0/T0': the URL's port"),
    (["--smtp", "m:25", "--mail-from", "a@b.c", "--mail-domain", "not a domain"], "--mail-domain 'not a domain'"),
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


def test_good_settings_travel_in_a_private_file_without_the_password(login, monkeypatch, tmp_path):
    monkeypatch.chdir(login.parent)
    paths = StatePaths(tmp_path / "home")
    paths.ensure()
    settings = _notice_settings(smtp="mail.example.org:587", mail_from="gqa@example.org", starttls=True,
                                login_file=login.name, mail_domain="example.org", webhook=None, alerts_to=None)
    flag, path = _notice_options(paths, settings)
    assert flag == "--notices-file" and path == str(paths.home / "notices.json")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    text = open(path).read()
    assert "s3cret" not in text
    assert json.loads(text) == {"smtp": "mail.example.org:587", "mail_from": "gqa@example.org", "starttls": True,
                                "login_file": str(login), "mail_domain": "example.org"}
    assert read_settings(path) == settings
    assert sorted(p.name for p in paths.home.iterdir() if p.is_file()) == ["notices.json"]   # no temporary left
    # none given: no argument, and no file left over from a start before
    assert _notice_options(paths, _notice_settings(smtp=None, mail_from=None, starttls=False, login_file=None,
                                                   mail_domain=None, webhook=None, alerts_to=None)) == []
    assert not os.path.exists(path)


def test_a_settings_file_others_may_read_is_refused(tmp_path):
    path = tmp_path / "notices.json"
    path.write_text('{"webhook": "https://hooks.example.org/T0"}')
    os.chmod(path, 0o644)
    with pytest.raises(SpecError, match="may be read by others"):
        read_settings(path)


@pytest.mark.parametrize("argv", [
    ["--smtp", "m:25", "--mail-from", "a@b.c", "--mail-domain", "example.org", "--alerts-to", "ops"],
    ["--smtp", "m:25", "--mail-from", "a@b.c", "--alerts-to", "ops@example.org"],
    ["--alerts-to", "https://hooks.example.org/T0/B0/x"],
    ["--webhook", "https://hooks.example.org/T0/B0/x", "--alerts-to", "https://hooks.example.org/T1"],
])
def test_alerts_to_that_can_be_delivered_is_taken(argv):
    names = {"--smtp": "smtp", "--mail-from": "mail_from", "--mail-domain": "mail_domain",
             "--alerts-to": "alerts_to", "--webhook": "webhook"}
    given = {names[flag]: value for flag, value in zip(argv[::2], argv[1::2])}
    assert NoticeSettings(**given).alerts_to == given["alerts_to"]


def test_the_start_line_shows_a_urls_scheme_host_and_port_alone():
    said = NoticeSettings(webhook="https://hooks.slack.com/services/T0/B0/SECRETTOKEN",
                          alerts_to="http://alerts.example.org:8080/SECRET?token=SECRET").describe()
    assert said == "notices: webhook https://hooks.slack.com/…; alerts to http://alerts.example.org:8080/…"
    assert redacted("https://user:SECRET@[::1]:99/x") == "https://[::1]:99/…"
