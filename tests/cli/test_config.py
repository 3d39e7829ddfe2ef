"""`gqa config`: the INI file, its profiles, the environment over the file,
and bad values refused with nothing written."""

import json

import pytest

from cli.config_file import ConfigError, backend_of, config_path, resolve
from cli.main import main

URL = "https://abc123.execute-api.eu-west-1.amazonaws.com/prod"


@pytest.fixture
def config(tmp_path, monkeypatch):
    path = tmp_path / "gqa" / "config"
    monkeypatch.setenv("GQA_CONFIG", str(path))
    for name in ("AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    return path


def run(capsys, *args):
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_without_a_file_the_backend_is_local(config):
    settings = resolve(env={"GQA_CONFIG": str(config)})
    assert (settings.backend, settings.endpoint, settings.profile) == ("local", None, "default")


def test_the_file_lives_under_xdg_config_home_or_home():
    assert str(config_path({"XDG_CONFIG_HOME": "/x"})) == "/x/gqa/config"
    assert str(config_path({"GQA_CONFIG": "/y/c", "XDG_CONFIG_HOME": "/x"})) == "/y/c"


def test_profiles_are_sections_chosen_by_flag_then_environment(config):
    config.parent.mkdir(parents=True)
    config.write_text(f"[default]\nbackend = local\n\n[work]\nbackend = aws\nendpoint = {URL}\n"
                      "aws_profile = research\n")
    env = {"GQA_CONFIG": str(config)}
    assert resolve(env=env).backend == "local"
    work = resolve(env=env | {"GQA_PROFILE": "work"})
    assert (work.backend, work.endpoint, work.aws_profile) == ("aws", URL, "research")
    assert resolve("default", env=env | {"GQA_PROFILE": "work"}).backend == "local"    # the flag wins
    assert work.sources["endpoint"] == f"{config} [work]"


@pytest.mark.parametrize("variable, key, value", [
    ("GQA_BACKEND", "backend", "local"),
    ("GQA_API_ENDPOINT", "endpoint", "https://other.example.com/v1"),
    ("AWS_REGION", "region", "ap-south-1"),
    ("AWS_PROFILE", "aws_profile", "ops"),
])
def test_the_environment_wins_over_the_file(config, variable, key, value):
    config.parent.mkdir(parents=True)
    config.write_text(f"[default]\nbackend = aws\nendpoint = {URL}\nregion = eu-west-1\naws_profile = research\n")
    settings = resolve(env={"GQA_CONFIG": str(config), variable: value})
    assert getattr(settings, key) == value and settings.sources[key] == f"environment {variable}"


@pytest.mark.parametrize("text, words", [
    ("[default]\nbackend = cloud\n", "backend must be local or aws"),
    ("[default]\nendpoint = http://api.example.com\n", "endpoint must be an https:// URL"),
    ("[default]\nregion = Europe\n", "not an AWS region"),
    ("[default]\ncolour = blue\n", "unknown setting(s) colour"),
    ("backend = aws\n", "not a valid config file"),
])
def test_a_bad_file_says_where_and_what(config, text, words):
    config.parent.mkdir(parents=True)
    config.write_text(text)
    with pytest.raises(ConfigError) as bad:
        resolve(env={"GQA_CONFIG": str(config)})
    assert words in str(bad.value) and str(config) in str(bad.value)
    assert backend_of({"GQA_CONFIG": str(config)}) == "invalid"     # the fast path never raises


def test_a_setting_gqa_does_not_know_can_be_unset_to_mend_the_file(config, capsys):
    config.parent.mkdir(parents=True)
    config.write_text("[default]\nbackend = local\ncolour = blue\n")
    assert run(capsys, "queue")[0] == 2                       # every command refuses the file...
    assert run(capsys, "config", "unset", "colour")[0] == 0   # ...until the key is gone
    assert "colour" not in config.read_text() and "backend = local" in config.read_text()
    code, _, err = run(capsys, "config", "unset", "colour")
    assert code == 2 and "unknown setting 'colour'" in err


def test_an_unknown_profile_asked_for_by_name_is_an_error(config):
    with pytest.raises(ConfigError, match="no profile 'work'"):
        resolve("work", env={"GQA_CONFIG": str(config)})


def test_set_show_unset(config, capsys):
    assert run(capsys, "config", "set", "backend", "aws", "--profile", "work")[0] == 0
    assert run(capsys, "config", "set", "endpoint", URL + "/", "--profile", "work")[0] == 0
    assert "[work]" in config.read_text()
    code, out, _ = run(capsys, "--profile", "work", "config", "show", "-o", "json")
    shown = json.loads(out)
    assert code == 0 and shown["backend"] == "aws" and shown["endpoint"] == URL    # trailing slash dropped
    assert shown["region"] is None and shown["sources"]["region"] == "default"
    assert run(capsys, "config", "unset", "endpoint", "--profile", "work")[0] == 0
    assert "endpoint" not in config.read_text()
    code, _, err = run(capsys, "config", "unset", "endpoint", "--profile", "work")
    assert code == 0 and "was not set" in err


@pytest.mark.parametrize("args, words", [
    (("config", "set", "backend", "cloud"), "backend must be local or aws"),
    (("config", "set", "colour", "blue"), "unknown setting 'colour'"),
    (("config", "set", "endpoint", "ftp://x"), "endpoint must be an https:// URL"),
    (("config", "set", "region", "us-east-1", "--profile", "a b"), "invalid profile name"),
    (("config", "set", "endpoint", "https://a.example.com:99999/v1"), "has no valid port (1 to 65535)"),
    (("config", "set", "endpoint", "https://a.example.com:x/v1"), "has no valid port"),
    (("config", "set", "endpoint", "https://a.example.com/v1\tx"), "must be one line of printable characters"),
    (("config", "set", "aws_profile", "dev\n[other]"), "must be one line of printable characters"),
])
def test_invalid_values_exit_2_and_write_nothing(config, capsys, args, words):
    code, _, err = run(capsys, *args)
    assert code == 2 and words in err
    assert not config.exists()


def test_a_bad_config_stops_commands_that_need_a_backend(config, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GQA_HOME", str(tmp_path / "home"))
    config.parent.mkdir(parents=True)
    config.write_text("[default]\nbackend = cloud\n")
    code, _, err = run(capsys, "queue")
    assert code == 2 and "backend must be local or aws" in err


def test_the_aws_backend_without_an_endpoint_says_how_to_set_it(config, capsys, monkeypatch):
    monkeypatch.setenv("GQA_BACKEND", "aws")
    code, _, err = run(capsys, "queue")
    assert code == 2 and "gqa config set endpoint URL" in err


def test_local_commands_stay_local_on_aws(config, capsys, tmp_path, monkeypatch):
    from gqa.adapters.local.store import SqliteStore

    monkeypatch.setenv("GQA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GQA_BACKEND", "aws")
    monkeypatch.setenv("GQA_API_ENDPOINT", URL)
    (tmp_path / "home").mkdir()
    SqliteStore(tmp_path / "home" / "gqa.db")   # the machine's queue: `local status` reads it, makes none
    code, out, _ = run(capsys, "local", "status", "-o", "json")
    assert code == 0 and json.loads(out)["home"] == str(tmp_path / "home")


def test_the_daemon_fast_path_is_not_taken_on_aws(config, monkeypatch):
    from cli.client import served

    assert served(["submit", "--", "true"])
    monkeypatch.setenv("GQA_BACKEND", "aws")
    assert not served(["submit", "--", "true"])


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary_one(config, monkeypatch):
    from cli import config_file

    config_file.set_value(config, "default", "backend", "aws")
    before = config.read_text()

    def fail(*_):
        raise OSError("disk full")

    monkeypatch.setattr(config_file.os, "replace", fail)
    with pytest.raises(OSError):
        config_file.set_value(config, "default", "backend", "local")
    assert config.read_text() == before and [p.name for p in config.parent.iterdir()] == ["config"]
