"""`gqa submit` served for the light client (cli/client.py): the client
sends its argv, working directory and environment; the daemon parses the
argv with the CLI's own option definitions, builds the spec the way the
CLI does (cli.submit.spec_from_options) and records it through the submit
service, then answers with what the CLI would have printed. Nothing here
changes the daemon's process state (no chdir, no redirected stdout), so
one client can never disturb another."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from gqa.models.errors import GqaError

if TYPE_CHECKING:
    from gqa.services.submit import SubmitService

log = logging.getLogger("gqa.daemon")


@dataclass
class SubmitCommand:
    submitter: SubmitService

    @cached_property
    def command(self):
        import typer.main

        # cli.submit registers `gqa submit` on the app as it loads; the CLI's other commands are not needed
        import cli.submit  # noqa: F401
        from cli.app import app

        return typer.main.get_command(app).commands["submit"]

    def run(self, argv: list[str], cwd: str, env: dict[str, str], user: str | None, caller=None) -> dict:
        """`caller`: the Principal whose right to the spec's team is checked (services/teams.py)."""
        from typer.exceptions import Exit, TyperException

        from cli.submit import as_submitted, spec_from_options, submitted_text

        args, command = list(argv[1:]), None
        if "--" in args:
            cut = args.index("--")
            args, command = args[:cut], args[cut + 1:]
        warnings: list[str] = []
        try:
            with self.command.make_context("gqa submit", args) as ctx:
                params = dict(ctx.params)
        except Exit as exc:
            return _answer(exc.exit_code)
        except TyperException as exc:   # a usage error: an unknown option, a value of the wrong type
            message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
            return _answer(2, err=f"gqa: error: {message}\n")
        fmt = str(params.get("output") or "table").lower()
        if fmt not in ("table", "json"):
            return _answer(2, err=f"gqa: error: unknown output format {fmt!r}; use table or json\n")
        try:
            spec = spec_from_options(params, command, warn=warnings.append, cwd=cwd)
            jobs = self.submitter.submit(spec, environment=dict(env), owner=user, caller=caller)
        except GqaError as exc:
            return _answer(2, err=_lines(warnings) + f"gqa: error: {exc}\n")
        except Exception:   # a bug must not take the daemon down, nor show the client a traceback
            log.exception("serving `gqa submit` failed")
            return _answer(1, err="gqa: error: the queue daemon failed to record the job (see its log); "
                                  "check `gqa queue` before submitting again\n")
        out, err = submitted_text(as_submitted(jobs), fmt, running=True)
        return _answer(0, out, _lines(warnings) + err)


def _lines(messages: list[str]) -> str:
    return "".join(m + "\n" for m in messages)


def _answer(code: int, out: str = "", err: str = "") -> dict:
    return {"code": code, "stdout": out, "stderr": err}
