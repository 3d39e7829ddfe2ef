"""`gqa ui`'s web application (Starlette): the page and its own script and
style (cli/ui_static/, nothing fetched from elsewhere, so it works offline),
the snapshot it polls (GET /api/snapshot) and the report's figures over the
last day (GET /plots/{name}.png, gqa/reporting). Read-only: every other
method is answered 405."""

from __future__ import annotations

import asyncio
import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from gqa.reporting.figures import FIGURES

from .ui_view import page_data, read

STATIC = Path(__file__).with_name("ui_static")
REFRESH = 3.0        # seconds between the page's polls
FRESH = 1.0          # seconds a read serves every tab that asks within them
PLOT_SPAN = 24 * 3600.0   # the plots' period: the last day
PLOT_EVERY = 60.0    # seconds a report's figures serve before the next is built (it reads a day of history)
LOOPBACK_NAMES = ["127.0.0.1", "localhost", "::1", "[::1]"]

# the page runs only its own files: no inline script, nothing from another origin, never framed
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' blob:; style-src 'self'; script-src 'self'; "
                               "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class Snapshots:
    """The backend's reads, made on one worker thread (a local queue's SQLite
    connection belongs to the thread that opened it, and a read must not stall
    the server's event loop), shared by the requests that arrive within FRESH
    seconds of one another."""

    def __init__(self, backend, source: str, *, clock: Callable[[], float] = time.time, fresh: float = FRESH,
                 plot_every: float = PLOT_EVERY):
        self.backend, self.source, self.clock, self.fresh, self.plot_every = backend, source, clock, fresh, plot_every
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gqa-ui-read")
        self.lock, self.plot_lock = asyncio.Lock(), asyncio.Lock()
        self.last: tuple[float, dict[str, Any]] | None = None
        self.report: tuple[int, Any, dict[str, bytes]] | None = None    # its version, the Report, figures drawn

    async def latest(self) -> dict[str, Any]:
        async with self.lock:
            now = self.clock()
            if self.last is None or now - self.last[0] >= self.fresh:
                data = await self._on_worker(lambda: page_data(read(self.backend), source=self.source))
                self.last = (now, data)
            return self.last[1]

    def plots_version(self) -> int:
        """Which report the figures are of now: a new one each `plot_every` seconds."""
        return int(self.clock() // self.plot_every)

    async def figure(self, name: str) -> bytes:
        """The report's figure `name` over the last day, as `gqa report` draws it."""
        from gqa.reporting import build
        from gqa.reporting.figures import render_figure

        from .report import report_input

        async with self.plot_lock:
            now = self.clock()
            if self.report is None or self.report[0] != self.plots_version():
                built = await self._on_worker(lambda: build(report_input(self.backend, now - PLOT_SPAN, now, now)))
                self.report = (self.plots_version(), built, {})
            _, built, drawn = self.report
            if name not in drawn:
                drawn[name] = await self._on_worker(lambda: render_figure(built, name))
            return drawn[name]

    async def _on_worker(self, work):
        return await asyncio.get_running_loop().run_in_executor(self.worker, work)

    def close(self) -> None:
        self.worker.shutdown(wait=False, cancel_futures=True)


class ReadOnly:
    """Only GET (and HEAD) reach the application; anything else is 405, on every path."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in ("GET", "HEAD"):
            response = PlainTextResponse("read-only: only GET", status_code=405, headers={"Allow": "GET, HEAD"})
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


class Headers:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message):
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = list(message["headers"]) + [(k.lower().encode(), v.encode())
                                                                 for k, v in HEADERS.items()]
            await send(message)
        await self.app(scope, receive, with_headers)


def _names(host: str | None) -> list[str]:
    """How a request's Host header names `host`: an IPv6 address in brackets, a name in any case."""
    if not host:
        return []
    return [f"[{host}]"] if ":" in host else [host.lower()]


def create_app(backend, source: str, *, loopback_only: bool = True, host: str | None = None,
               refresh: float = REFRESH, clock: Callable[[], float] = time.time,
               plot_every: float = PLOT_EVERY) -> Starlette:
    """The page over `backend` (cli/backend.py). `loopback_only`: answer only
    requests addressed to this machine by a loopback name, or by `host`, the
    name it was served on (`--host 127.0.0.2`, or the machine's name where that
    resolves to a loopback address), so another site cannot read the page by
    pointing a name of its own at 127.0.0.1."""
    from gqa.models.errors import GqaError

    snapshots = Snapshots(backend, source, clock=clock, plot_every=plot_every)

    async def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    async def snapshot(request: Request) -> Response:
        try:
            data = await snapshots.latest()
        except GqaError as exc:
            return JSONResponse({"error": str(exc), "refresh": refresh}, status_code=503,
                                headers={"Cache-Control": "no-store"})
        # a new address for each report, so the page's images change when the figures do
        version = snapshots.plots_version()
        plots = [{"name": name, "title": title, "url": f"/plots/{name}.png?v={version}"}
                 for name, title in FIGURES.items()]
        return JSONResponse({**data, "refresh": refresh, "plots": plots, "plots_every": snapshots.plot_every},
                            headers={"Cache-Control": "no-store"})

    async def plot(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in FIGURES:
            return PlainTextResponse(f"no figure {name!r}; there are {', '.join(FIGURES)}", 404)
        try:
            png = await snapshots.figure(name)
        except GqaError as exc:
            return PlainTextResponse(str(exc), 503)
        return Response(png, media_type="image/png", headers={"Cache-Control": "no-store"})

    routes = [
        Route("/", page, methods=["GET"]),
        Route("/api/snapshot", snapshot, methods=["GET"]),
        Route("/plots/{name}.png", plot, methods=["GET"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    middleware = [Middleware(ReadOnly), Middleware(Headers)]
    if loopback_only:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=[*LOOPBACK_NAMES, *_names(host)]))
    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        snapshots.close()

    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.state.snapshots = snapshots
    return app
