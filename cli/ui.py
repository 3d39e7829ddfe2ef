"""`gqa ui`: a read-only web page of the queue, the GPUs, the teams and their
plots, updating live, served on this machine (cli/ui_server.py) by uvicorn.
It reads through the backend the profile chooses, like every other command."""

from typing import Annotated

import typer

from .app import app
from .options import Output, check_output
from .output import fail, note, user_errors
from .stop_signals import stop_on_signals

DEFAULT_PORT = 8765


@app.command("ui")
def ui(
    host: Annotated[str, typer.Option("--host", help="Address to serve on. Anything but this machine's loopback "
                                      "lets others see the page, which has no authentication.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to serve on (0: any free port).")] = DEFAULT_PORT,
    open_browser: Annotated[bool, typer.Option("--open/--no-open", help="Open the page in a browser.")] = False,
    output: Output = "table",
):
    """A web page of the queue, GPUs, teams and plots, updating live (read-only).

    With -o json its address goes to stdout as one JSON line once it listens (scripts and --port 0)."""
    fmt = check_output(output)
    if not 0 <= port <= 65535:
        fail(f"--port must be from 0 to 65535, got {port}")
    with user_errors():
        from .backend import backend

        be = backend()
        _require_queue(be)
        source = _source(be)
    listener, loopback = _listen(host, port)
    bound = listener.getsockname()[1]
    url = f"http://{'[' + host + ']' if ':' in host else host}:{bound}/"
    server = _server(be, source, loopback, host)
    # from the first word that says where it listens, Ctrl-C or SIGTERM is a clean stop, exit 0, wherever it
    # lands (whoever reads that word may send one at once); uvicorn takes the signals over while it serves
    with stop_on_signals() as stop:
        stop.tell(lambda: setattr(server, "should_exit", True))
        try:
            if not loopback:
                note(f"gqa: warning: the page has no authentication: anyone who can reach {host}:{bound} sees "
                     "the queue (job names, owners, teams and spend)")
            if fmt == "json":
                import json
                import sys

                sys.stdout.write(json.dumps({"url": url, "host": host, "port": bound, "source": source}) + "\n")
                sys.stdout.flush()
            else:
                note(f"gqa ui: {source} at {url} (Ctrl-C to stop)")
            if open_browser and not stop.requested:
                import webbrowser

                webbrowser.open(url)      # the socket already listens: the browser's request waits for the server
            if not stop.requested:
                server.run(sockets=[listener])
        finally:
            try:
                listener.close()
            except OSError:
                pass
    note("gqa ui: stopped")


def _listen(host: str, port: int):
    """A listening socket on host:port, and whether host is a loopback address;
    a port in use, a name that does not resolve, or an address not ours is one line and exit 2."""
    import ipaddress
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        fail(f"--host {host}: cannot resolve it ({exc.strerror})")
    family, _, _, _, address = infos[0]
    try:
        loopback = ipaddress.ip_address(str(address[0]).split("%")[0]).is_loopback
    except ValueError:
        loopback = False
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # a restart soon after a stop; never a live port
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        import errno

        if exc.errno == errno.EADDRINUSE:
            fail(f"port {port} on {host} is in use (another gqa ui?); choose another with --port, or --port 0 "
                 "for any free one")
        if exc.errno == errno.EACCES:
            fail(f"port {port} on {host} needs privileges this user lacks; use a port from 1024, e.g. --port "
                 f"{DEFAULT_PORT}")
        fail(f"cannot serve on {host}:{port}: {exc.strerror or exc}")
    return sock, loopback


def _server(be, source: str, loopback: bool, host: str):
    """The web server, made (its modules imported) before the command says where it listens."""
    import uvicorn

    from .ui_server import REFRESH, create_app

    # a poll is a read of the whole queue: no more often than the backend's own waits poll (5 s on AWS)
    refresh = max(REFRESH, be.poll_interval)
    config = uvicorn.Config(create_app(be, source, loopback_only=loopback, host=host, refresh=refresh),
                            log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=5)
    return uvicorn.Server(config)


def _require_queue(be) -> None:
    """The page is a read: where no queue is it is not served (an empty queue made here would stand in
    for a shared box's from then on), as `gqa queue` says."""
    from .local_backend import LocalBackend

    if isinstance(be, LocalBackend):
        be.require_queue()


def _source(be) -> str:
    """Which queue the page shows, in words."""
    from .aws_backend import AwsBackend
    from .daemon_backend import DaemonBackend

    if isinstance(be, AwsBackend):
        return f"gqa on AWS ({be.endpoint})"
    if isinstance(be, DaemonBackend):
        return f"the shared queue at {be.home}"
    return f"the local queue at {be.paths.home}"
