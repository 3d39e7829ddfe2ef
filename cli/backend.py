"""Which backend the CLI talks to, as `gqa config` says: the local queue in
this process (local_backend.py), a shared box's queue through its daemon
(daemon_backend.py), or gqa on AWS through its API (aws_backend.py). The one
place the CLI chooses adapters."""

from .local_backend import LocalBackend


def local_backend():
    """This machine's queue: a user's own (SQLite, read here), or a shared box's
    system queue, where every command goes through the daemon (users cannot read
    its database). Which home: gqa.adapters.local.system.state_home."""
    from gqa.adapters.local.system import is_system, state_home

    home = state_home()
    if is_system(home):
        from .daemon_backend import DaemonBackend

        return DaemonBackend(home)
    return LocalBackend(home)


def backend():
    """The backend the configuration chooses (`gqa config`; `--profile`)."""
    from gqa.models.errors import SpecError

    from .config_file import ConfigError, resolve
    from .context import CALLER, PROFILE

    if CALLER.get() is not None:   # run by the local daemon for a client: its own queue
        return LocalBackend()
    try:
        settings = resolve(PROFILE.get())
    except ConfigError as exc:
        raise SpecError(str(exc)) from None
    if not settings.remote:
        return local_backend()
    if not settings.endpoint:
        raise SpecError(f"the AWS backend needs the API's URL: `gqa config set endpoint URL"
                        f"{'' if settings.profile == 'default' else ' --profile ' + settings.profile}` "
                        "(the invoke URL of the gqa API)")
    from .aws_backend import AwsBackend

    return AwsBackend(settings.endpoint, settings.region, settings.aws_profile)
