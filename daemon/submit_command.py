"""`gqa submit` served for the light client (cli/client.py): the client
sends its argv, working directory and environment; the daemon parses the
argv with the CLI's own option definitions, builds the spec the way the
CLI does (cli.submit.spec_from_options) and records it through the submit
service, then answers with what the CLI would have printed. Nothing here
changes the daemon's process state (no chdir, no redirected stdout), so
one client can never disturb another.

The daemon opens no file for its caller: it may be root, and the caller
anyone. The job file or batch script comes in the request, read by the
client with the caller's own rights (cli/job_file.py), and the spec is built
from those bytes (gqa.models.loader.files_sent); a file the request does not
carry is refused."""

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

    def run(self, argv: list[str], cwd: str, env: dict[str, str], user: str | None, caller=None,
            files: object = None) -> dict:
        """`caller`: the Principal whose right to the spec's team is checked (services/teams.py);
        `files`: the request's job file or script, as the client read it (cli/job_file.py)."""
        from typer.exceptions import Exit, TyperException

        from cli.submit import as_submitted, spec_from_options, submitted_text
        from gqa.models.loader import files_sent

        try:
            sent = sent_files(files)
        except ValueError as exc:
            return _answer(2, err=f"gqa: error: malformed submit request: {exc}\n")
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
            with files_sent(sent):
                spec = spec_from_options(params, command, warn=warnings.append, cwd=cwd, environment=dict(env))
            done = self.submitter.record(spec, environment=dict(env), owner=user, caller=caller)
        except GqaError as exc:
            return _answer(2, err=_lines(warnings) + f"gqa: error: {exc}\n")
        except Exception:   # a bug must not take the daemon down, nor show the client a traceback
            log.exception("serving `gqa submit` failed")
            return _answer(1, err="gqa: error: the queue daemon failed to record the job (see its log); "
                                  "check `gqa queue` before submitting again\n")
        out, err = submitted_text(as_submitted(done.jobs), fmt, running=True, note_of_pass=done.note)
        return _answer(0, out, _lines(warnings) + err)


def sent_files(files: object) -> dict:
    """The request's "files" (cli/job_file.py) as the loader's SentFile by path.
    ValueError for anything else."""
    import base64
    import binascii

    from gqa.models.limits import MAX_SCRIPT_BYTES
    from gqa.models.loader import SentFile

    if files is None:
        return {}
    if not isinstance(files, list) or len(files) > 1:
        raise ValueError("files must be a list of at most one file")
    sent = {}
    for entry in files:
        if not (isinstance(entry, dict) and isinstance(entry.get("path"), str)):
            raise ValueError("each file needs its path")
        if isinstance(entry.get("error"), str):
            sent[entry["path"]] = SentFile(error=entry["error"])
            continue
        data, executable = entry.get("data"), entry.get("executable", False)
        if not isinstance(data, str) or not isinstance(executable, bool):
            raise ValueError("a file needs its data (base64) or an error")
        if len(data) > (MAX_SCRIPT_BYTES + 3) // 3 * 4 + 4:
            raise ValueError("a file larger than a batch script may be")
        try:
            sent[entry["path"]] = SentFile(base64.b64decode(data, validate=True), executable)
        except (binascii.Error, ValueError):
            raise ValueError("a file's data is not base64") from None
    return sent


def _lines(messages: list[str]) -> str:
    return "".join(m + "\n" for m in messages)


def _answer(code: int, out: str = "", err: str = "") -> dict:
    return {"code": code, "stdout": out, "stderr": err}
