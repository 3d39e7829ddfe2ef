"""Which backend the CLI talks to, from an INI file like the AWS CLI's:
$GQA_CONFIG, else $XDG_CONFIG_HOME/gqa/config, else ~/.config/gqa/config.

    [default]
    backend = aws
    endpoint = https://abc123.execute-api.us-east-1.amazonaws.com/v1
    region = us-east-1

    [work]
    backend = aws
    endpoint = https://...
    aws_profile = research

A profile is a section, chosen by `--profile`, else GQA_PROFILE, else
"default"; profiles do not inherit from each other. The environment wins over
the file: GQA_BACKEND, GQA_API_ENDPOINT, AWS_REGION, AWS_PROFILE.

Standard library only, imported inside the functions that need it: the fast
`gqa submit` path (cli/client.py) asks backend_of() on every submit, and
without a config file that costs one stat."""

from __future__ import annotations

import os
from collections.abc import Mapping

DEFAULT_PROFILE = "default"
BACKENDS = ("local", "aws")
KEYS = ("backend", "region", "endpoint", "aws_profile")
ENVIRONMENT = {"backend": "GQA_BACKEND", "endpoint": "GQA_API_ENDPOINT", "region": "AWS_REGION",
               "aws_profile": "AWS_PROFILE"}
PROFILE_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
REGION_RE = r"^[a-z]{2}(-[a-z]+)+-\d+$"
AWS_PROFILE_RE = r"^[\w.@+=,-]+$"
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


class ConfigError(ValueError):
    """A bad key, value, profile or file; the message says which and how to mend it."""


class Settings:
    """The settings in effect; `sources`: key -> where its value came from."""

    def __init__(self, profile: str, path, backend: str = "local", region: str | None = None,
                 endpoint: str | None = None, aws_profile: str | None = None,
                 sources: dict[str, str] | None = None):
        self.profile, self.path, self.backend = profile, path, backend
        self.region, self.endpoint, self.aws_profile = region, endpoint, aws_profile
        self.sources = dict(sources or {})

    @property
    def remote(self) -> bool:
        return self.backend == "aws"


def config_path(env: Mapping[str, str] = os.environ):
    """The file, as a pathlib.Path."""
    from pathlib import Path

    return Path(_config_file(env))


def _config_file(env: Mapping[str, str]) -> str:
    if env.get("GQA_CONFIG"):
        return os.path.expanduser(env["GQA_CONFIG"])
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "gqa", "config")


def profile_name(flag: str | None = None, env: Mapping[str, str] = os.environ) -> str:
    import re

    name = flag or env.get("GQA_PROFILE") or DEFAULT_PROFILE
    if not re.match(PROFILE_RE, name):
        raise ConfigError(f"invalid profile name {name!r}: use letters, digits, '.', '_' or '-'")
    return name


def check(key: str, value: str) -> str:
    """The value as stored, or ConfigError saying what is wrong with it."""
    import re
    from urllib.parse import urlsplit

    if key not in KEYS:
        raise ConfigError(f"unknown setting {key!r}; choose from {', '.join(KEYS)}")
    value = value.strip()
    if not value:
        raise ConfigError(f"{key} is empty; use `gqa config unset {key}` to remove it")
    if not value.isprintable():   # a newline would write a second line into the file, a tab a URL no one can call
        raise ConfigError(f"{key} must be one line of printable characters, got {value!r}")
    if key == "backend" and value not in BACKENDS:
        raise ConfigError(f"backend must be {' or '.join(BACKENDS)}, got {value!r}")
    if key == "region" and not re.match(REGION_RE, value):
        raise ConfigError(f"{value!r} is not an AWS region name, e.g. us-east-1")
    if key == "endpoint":
        parts = urlsplit(value)
        local = parts.hostname in LOCAL_HOSTS
        if not parts.hostname or parts.scheme not in ("https", "http") or (parts.scheme == "http" and not local):
            raise ConfigError(f"endpoint must be an https:// URL (the API's invoke URL, e.g. "
                              f"https://abc123.execute-api.us-east-1.amazonaws.com/v1), got {value!r}")
        try:   # a port past 65535 or not a number: every request would fail to parse the URL
            _ = parts.port
        except ValueError:
            raise ConfigError(f"endpoint {value!r} has no valid port (1 to 65535)") from None
        value = value.rstrip("/")
    if key == "aws_profile" and not re.match(AWS_PROFILE_RE, value):
        raise ConfigError(f"{value!r} is not an AWS profile name")
    return value


def read(path):
    """The file as a ConfigParser (empty if there is none)."""
    import configparser

    parser = configparser.ConfigParser(interpolation=None, default_section="\0none")
    try:
        parser.read_string(path.read_text(), source=str(path))
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    except configparser.Error as exc:
        raise ConfigError(f"{path} is not a valid config file: {exc.message.splitlines()[0]}") from None
    return parser


def resolve(profile: str | None = None, env: Mapping[str, str] = os.environ) -> Settings:
    """The settings in effect: the environment, then the profile's section, then defaults."""
    path = config_path(env)
    name = profile_name(profile, env)
    parser = read(path)
    if profile is not None or env.get("GQA_PROFILE"):
        if name != DEFAULT_PROFILE and not parser.has_section(name):
            raise ConfigError(f"no profile {name!r} in {path}; create it with `gqa config set backend aws "
                              f"--profile {name}`")
    section = dict(parser[name]) if parser.has_section(name) else {}
    values: dict[str, str] = {}
    sources: dict[str, str] = {}
    for key in KEYS:
        if env.get(ENVIRONMENT[key]):
            raw, where = env[ENVIRONMENT[key]], f"environment {ENVIRONMENT[key]}"
        elif key in section:
            raw, where = section[key], f"{path} [{name}]"
        else:
            continue
        try:
            values[key] = check(key, raw)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        sources[key] = where
    unknown = sorted(set(section) - set(KEYS))
    if unknown:
        raise ConfigError(f"{path} [{name}]: unknown setting(s) {', '.join(unknown)}; "
                          f"use {', '.join(KEYS)}")
    return Settings(profile=name, path=path, sources=sources, **values)


def backend_of(env: Mapping[str, str] = os.environ) -> str:
    """Just the backend, never raising: for the fast path, which only needs to
    know whether the local daemon is the one to ask (on a bad file it runs the
    command in-process, which reports the problem)."""
    if env.get(ENVIRONMENT["backend"]):
        value = env[ENVIRONMENT["backend"]].strip()
        return value if value in BACKENDS else "invalid"
    if not env.get("GQA_PROFILE") and not os.path.exists(_config_file(env)):
        return "local"
    try:
        return resolve(env=env).backend
    except ConfigError:
        return "invalid"


def set_value(path, profile: str, key: str, value: str) -> str:
    value = check(key, value)
    parser = read(path)
    if not parser.has_section(profile):
        parser.add_section(profile)
    parser[profile][key] = value
    _write(path, parser)
    return value


def unset_value(path, profile: str, key: str) -> bool:
    """False if the key was not set. A key gqa does not know may be unset (a file written by
    hand or by another version refuses every command until it is gone)."""
    parser = read(path)
    if not parser.has_section(profile) or key not in parser[profile]:
        if key not in KEYS:
            raise ConfigError(f"unknown setting {key!r}; choose from {', '.join(KEYS)}")
        return False
    parser.remove_option(profile, key)
    if not parser[profile]:
        parser.remove_section(profile)
    _write(path, parser)
    return True


def _write(path, parser) -> None:
    """Whole or not at all: a temporary file beside it, then a rename."""
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".config-", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as out:
            parser.write(out)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
