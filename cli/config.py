"""`gqa config set|show|unset`: which backend the CLI talks to (see config_file.py)."""

from typing import Annotated, Optional

import typer

from .app import app as gqa
from .options import Output, check_output
from .output import fail, note, print_json

app = typer.Typer(help="Choose the backend: the local queue, or gqa on AWS (endpoint, region, AWS profile).",
                  no_args_is_help=True)
gqa.add_typer(app, name="config")
Profile = Annotated[Optional[str], typer.Option("--profile", help="The profile (section) to use; default: "
                                                "GQA_PROFILE, else 'default'.")]


def _chosen(profile: str | None) -> str | None:
    """This command's --profile, else `gqa --profile P config ...`'s."""
    from .context import PROFILE

    return profile or PROFILE.get()


Key = Annotated[str, typer.Argument(help="backend, region, endpoint or aws_profile.", show_default=False)]


@app.command("set")
def set_(key: Key, value: Annotated[str, typer.Argument(help="The value.", show_default=False)],
         profile: Profile = None):
    """Set KEY to VALUE in a profile, e.g. `gqa config set backend aws`."""
    from .config_file import ConfigError, config_path, profile_name, set_value

    try:
        name = profile_name(_chosen(profile))
        stored = set_value(config_path(), name, key, value)
    except ConfigError as exc:
        fail(str(exc))
    note(f"{key} = {stored} in profile {name} ({config_path()})")


@app.command("unset")
def unset(key: Key, profile: Profile = None):
    """Remove KEY from a profile (the default applies again)."""
    from .config_file import ConfigError, config_path, profile_name, unset_value

    try:
        name = profile_name(_chosen(profile))
        removed = unset_value(config_path(), name, key)
    except ConfigError as exc:
        fail(str(exc))
    note(f"{key} removed from profile {name}" if removed else f"{key} was not set in profile {name}")


@app.command("show")
def show(profile: Profile = None, output: Output = "table"):
    """The settings in effect and where each comes from."""
    fmt = check_output(output)
    from .config_file import KEYS, ConfigError, resolve

    try:
        settings = resolve(_chosen(profile))
    except ConfigError as exc:
        fail(str(exc))
    values = {key: getattr(settings, key) for key in KEYS}
    if fmt == "json":
        print_json({"profile": settings.profile, "file": str(settings.path), **values,
                    "sources": {key: settings.sources.get(key, "default") for key in KEYS}})
        return
    print(f"profile      {settings.profile}  ({settings.path})")
    for key in KEYS:
        value = values[key]
        print(f"{key:<12} {'-' if value is None else value}  ({settings.sources.get(key, 'default')})")
