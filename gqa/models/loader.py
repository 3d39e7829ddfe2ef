"""Turn what the user typed into a validated JobSpec: a YAML file, a script
with `#GQA` / `#SBATCH` directives, and command-line flags (flags win).
Every problem becomes one SpecError that names the field, the line and,
for a misspelt field, the nearest valid name."""

import difflib
import io
import json
import os
import shlex
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from .errors import SpecError
from .limits import MAX_SCRIPT_BYTES, MAX_SPEC_BYTES, size_text
from .nested import merge
from .sbatch import read_args
from .sbatch_env import read_environment
from .sbatch_request import Request, asks_for_gpus
from .spec import MAX_NAME, NAMED_PROBLEM, SPEC_FIELDS, JobSpec
from . import regular_file

YAML_SUFFIXES = (".yaml", ".yml")


def load_spec(path: str | None = None, *, overrides: dict[str, Any] | None = None,
              command: list[str] | None = None, warn=None, cwd: str | None = None,
              now: float | None = None, stdin: bytes | None = None,
              environment: Mapping[str, str] | None = None) -> JobSpec:
    """The spec for `gqa submit [FILE] [flags] [-- CMD...]`.

    `overrides` is a raw (unvalidated) nested dict from flags; `command`, if
    given, replaces the file's command (for a script: extra arguments). `cwd`
    is the submitter's working directory (absolute) when it is not this
    process's: a relative path or workdir is read against it, and it is the
    default workdir. `now` is the time of submission, which #SBATCH --begin
    is read against. `stdin`: a batch script read from standard input (as
    `sbatch <<EOF`), in place of a file (`path` None or "-"). `environment`: the
    submitter's, whose SBATCH_* variables a batch script's directives give way to
    (sbatch_env.py); a job file and a command are read without it."""
    here = os.getcwd() if cwd is None else cwd
    raw: dict[str, Any] = {}
    lines: dict[tuple, int] = {}
    source = None
    if stdin is not None and path in (None, "-"):
        source = STDIN
        if not stdin.strip():
            raise SpecError("nothing to run: the script on stdin is empty; give a job file, a script, or a "
                            "command after --")   # sbatch refuses an empty one too
        if len(stdin) > MAX_SCRIPT_BYTES:
            raise SpecError(f"larger than {size_text(MAX_SCRIPT_BYTES)}, the limit for a batch script (its job "
                            "keeps a copy): run a larger program from a short script", source=STDIN)
        raw = _script_raw(stdin, STDIN, STDIN_PATH, overrides, command, warn=warn, now=now, here=here,
                          executable=False, environment=environment)
        raw.setdefault("name", "sbatch")    # sbatch's name for a job whose script came on stdin
    elif path == "-":
        raise SpecError("nothing to run: `-` reads a script from stdin, and none was given")
    elif path is not None:
        source = path
        full = os.path.join(here, path)
        if path.endswith(YAML_SUFFIXES):
            raw, lines = parse_yaml(_read_job_file(full, path), source=path)
            if command:
                raw["command"] = command
        else:
            data = _read_script(full, path)    # once: its directives and what it runs are the same bytes
            raw = _script_raw(data, path, script_path(path, cwd=here), overrides, command, warn=warn, now=now,
                              here=here, executable=_executable(script_path(path, cwd=here), path),
                              environment=environment)
            raw.setdefault("name", default_name(Path(path).name))    # sbatch names a job after its script's file
    elif command:
        raw["command"] = list(command)
        raw.setdefault("name", shell_name(command[0]) if (overrides or {}).get("shell")
                       else default_name(Path(command[0]).name))
    else:
        raise SpecError("nothing to run: give a job file, a script, or a command after --")
    merge(raw, overrides or {})
    if raw.get("script") is not None:
        default_output(raw)
    raw.setdefault("workdir", here)
    if isinstance(raw["workdir"], str):
        raw["workdir"] = os.path.join(here, raw["workdir"].strip())   # relative to the submitter, never to us
    return validate(raw, lines=lines, source=source)


STDIN = "stdin"
STDIN_PATH = "/dev/stdin"   # a script's name when it came on stdin: the queue runs its kept copy


def _script_raw(data: bytes, source: str, full: str, overrides: dict[str, Any] | None,
                command: list[str] | None, *, warn, now: float | None, here: str, executable: bool,
                environment: Mapping[str, str] | None = None) -> dict:
    """A batch script's fields: its directives, how to run it, its copy."""
    refuse_dos_line_breaks(data, source)
    header = _read_header(io.BufferedReader(io.BytesIO(data)), source)
    raw = parse_directives(header, source=source, warn=warn, now=now,
                           given=(overrides or {}).get("resources") or {}, environment=environment)
    raw["command"] = ([full] if executable else interpreter(header, full, source)) + list(command or [])
    # kept as submitted, as sbatch keeps it: an edit or a removal after this changes no job
    raw["script"] = {"path": full, "text": _decoded(data, source)}
    raw.setdefault("workdir", here)
    raw["submit_dir"] = here                             # --chdir moves the workdir, not this
    return raw


def default_name(text: str) -> str:
    """A name gqa makes up (from a script's or a program's file name) made a
    valid one, where sbatch would take it as it is: cut to MAX_NAME, and each
    character a name cannot hold (a tab, a '\\') made '_'. A name the user
    gives is checked, never changed (JobSpec's validator)."""
    name = "".join(ch if ch.isprintable() and ch not in "/\\" else "_" for ch in text[:MAX_NAME])
    return name or "job"


def refuse_dos_line_breaks(data: bytes, source: str) -> None:
    """A script with a CR before a line's end is refused, in sbatch's words: its #! line would name
    `/bin/bash\\r`, and each of its commands would end in a CR."""
    at = data.find(b"\r\n")
    if at >= 0:
        raise SpecError("Batch script contains DOS line breaks (\\r\\n) instead of expected UNIX line breaks "
                        "(\\n).", line=data.count(b"\n", 0, at) + 1, source=source)


def shell_name(line: str) -> str:
    """A shell command's default name: the file name of its first word (`echo`
    for `echo $HOME | tr a-z A-Z`), else "shell"."""
    try:
        words = shlex.split(line)
    except ValueError:           # an unclosed quote: the shell will say so when it runs
        words = line.split()
    name = Path(words[0]).name if words else ""
    return name if name and name.isprintable() and "\\" not in name and len(name) <= MAX_NAME else "shell"


def validate_json(text: str, *, source: str | None = None) -> JobSpec:
    """A spec that travelled as JSON (an API request, a queue message)."""
    try:
        return JobSpec.model_validate_json(text)
    except ValidationError as exc:
        raise _friendly(exc, {}, source, raw=_json_or_none(text)) from None


def _json_or_none(text: str) -> Any:
    """The JSON pydantic refused, to tell its keys from union branch names; None if it is not JSON."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def validate(raw: dict[str, Any], *, lines: dict[tuple, int] | None = None, source: str | None = None) -> JobSpec:
    try:
        return JobSpec.model_validate(raw)
    except ValidationError as exc:
        raise _friendly(exc, lines or {}, source, raw=raw) from None


def parse_yaml(text: str, *, source: str | None = None) -> tuple[dict[str, Any], dict[tuple, int]]:
    """The mapping in a YAML job file and the line of every key path."""
    from . import safe_yaml  # PyYAML only when a file is read: most callers validate JSON

    data, node = safe_yaml.load(text, source=source)
    if not isinstance(data, dict):
        raise SpecError("a job file must be a YAML mapping (key: value lines)", line=1, source=source)
    lines: dict[tuple, int] = {}
    _record_lines(node, (), lines)
    return data, lines


def _record_lines(node, path: tuple, lines: dict[tuple, int]) -> None:
    import yaml

    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            sub = path + (key.value,)
            lines[sub] = key.start_mark.line + 1
            _record_lines(value, sub, lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[path + (i,)] = item.start_mark.line + 1
            _record_lines(item, path + (i,), lines)


def _friendly(exc: ValidationError, lines: dict[tuple, int], source: str | None, *, raw: Any = None) -> SpecError:
    errors = exc.errors()
    # a misspelt field also shows up as the real one "missing": name the misspelling
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = _real_loc(err["loc"], raw)
    field = ".".join(str(p) for p in loc) or "spec"
    line = _line_for(loc, lines)
    if err["type"] == "extra_forbidden" and loc:
        parent = ".".join(str(p) for p in loc[:-1])
        model = SPEC_FIELDS.get(parent)
        valid = sorted(model.model_fields) if model else []
        near = difflib.get_close_matches(str(loc[-1]), valid, n=1, cutoff=0.5)
        hint = f"; did you mean {near[0]!r}?" if near else (f"; valid fields: {', '.join(valid)}" if valid else "")
        return SpecError(f"unknown field {field!r}{hint}", line=line, source=source)
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == NAMED_PROBLEM:  # the message names the field itself, e.g. "command[2] contains a NUL byte"
        return SpecError(message, line=line, source=source)
    if err["type"] == "missing":
        message = "is required"
    if err["type"] == "invalid_key":
        # a YAML key that is a number (`1: x`): its line is recorded under the key's text
        line = _line_for(loc[:-1] + (str(loc[-1]),), lines) or line
        message = f"a key must be text, got {_found(err['input'])}"
    elif err["type"] in TYPE_NOUNS:
        message = _wrong_type(err, [e for e in errors if _real_loc(e["loc"], raw) == loc])
    if field == "spec":
        return SpecError(message, line=line, source=source)
    if err["type"] == "enum":
        message = f"must be one of {err['ctx'].get('expected', '')}, got {err['input']!r}"
    return SpecError(f"{field}: {message}", line=line, source=source)


# what a type error expects, in a job file's words: a union's branches are listed together
TYPE_NOUNS = {"string_type": "a string", "int_type": "an integer", "float_type": "a number",
              "bool_type": "a boolean", "dict_type": "a mapping", "list_type": "a list"}
_ABSENT = object()   # a part of the path that is not in the input (a missing field)


def _wrong_type(err: ErrorDetails, same_place: list[ErrorDetails]) -> str:
    """What the field takes (each of a union's types) and what was found:
    `Input should be a valid boolean (true or false), got 'yes'`."""
    nouns = list(dict.fromkeys(TYPE_NOUNS[e["type"]] for e in same_place if e["type"] in TYPE_NOUNS))
    if len(nouns) > 1:
        expected = f"Input should be {', '.join(nouns[:-1])} or {nouns[-1]}"
    else:
        expected = err["msg"] + (" (true or false)" if err["type"] == "bool_type" else "")
    return f"{expected}, got {_found(err['input'])}"


def _found(value: Any) -> str:
    """A value as the job file wrote it: null, true, 1.50, 'yes'."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return getattr(value, "yaml_text", None) or str(value)
    if isinstance(value, (dict, list)):
        return "a mapping" if isinstance(value, dict) else "a list"
    return repr(value)


def _real_loc(loc: tuple, raw: Any) -> tuple:
    """The keys and indices of `loc`, without the union branch names pydantic
    adds ("list[str]", "function-after[...]", "constrained-str"). A key the
    user wrote is kept even when it looks like one: the input is walked
    alongside, and below a value that is no mapping nor list every name is a
    branch name."""
    out: list = []
    node = raw
    for part in loc:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and -len(node) <= part < len(node):
            node = node[part]
        elif isinstance(part, str) and (part == "str" or "[" in part or "(" in part
                                        or (node is not _ABSENT and not isinstance(node, (dict, list)))):
            continue
        else:
            node = _ABSENT
        out.append(part)
    return tuple(out)


def _line_for(loc: tuple, lines: dict[tuple, int]) -> int | None:
    for end in range(len(loc), 0, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


# -- scripts with directives -------------------------------------------------

def parse_directives(text: str, *, source: str | None = None, warn=None, now: float | None = None,
                     given: dict[str, Any] | None = None,
                     environment: Mapping[str, str] | None = None) -> dict[str, Any]:
    """`#GQA` and `#SBATCH` lines at the top of a script, read as Slurm does:
    until the first line that is neither blank nor a comment, each with the
    option table of gqa/models/sbatch.py. `now` is what --begin is read
    against (without it, --begin is refused); `given` the command line's
    resources, which the quantities asked per task, CPU or GPU are settled
    with; `environment` the submitter's, whose SBATCH_* variables override the
    lines, as sbatch reads them (sbatch_env.py). A script with #SBATCH lines
    that name no GPU asks for none, as under Slurm (its default output file is
    load_spec's: default_output)."""
    request = Request(now=now, warn=warn, source=source)
    slurm = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if number == 1 and stripped.startswith("#!"):
            continue
        if stripped and not stripped.startswith("#"):
            break
        for prefix, strict in (("#GQA", True), ("#SBATCH", False)):
            # sbatch reads a directive only from column 0, its word then any blank (a tab too);
            # an indented one is a plain comment
            rest = line[len(prefix):]
            if line.startswith(prefix) and (not rest or rest[0].isspace()):
                request.line = number
                try:
                    args = shlex.split(rest, comments=True)
                except ValueError as exc:
                    raise SpecError(f"cannot parse directive: {exc}", line=number, source=source) from None
                read_args(args, request, strict=strict)
                slurm = slurm or not strict
    read_environment(environment or {}, request)
    request.given(given or {})
    raw = request.finish()
    if slurm and not asks_for_gpus(request):
        merge(raw, {"resources": {"gpus": 0}})
    return raw


def default_output(raw: dict[str, Any]) -> None:
    """sbatch's default file for a batch script's output (directives or not),
    in the job's working directory; read once the command line's flags are
    merged, so `gqa submit --array=0-2 run.sh` writes slurm-%A_%a.out too."""
    if raw.get("output") is None:
        raw["output"] = "slurm-%A_%a.out" if raw.get("array") else "slurm-%j.out"


def script_command(path: str, text: str, *, cwd: str | None = None) -> list[str]:
    """How to run a script: itself when executable, else its #! interpreter, else sh."""
    full = script_path(path, cwd=cwd)
    if os.access(full, os.X_OK):
        return [full]
    return interpreter(text, full, path)


def interpreter(text: str, full: str, source: str) -> list[str]:
    """A script run through its #! interpreter, else sh."""
    first = text.splitlines()[0] if text else ""
    if first.startswith("#!"):
        try:
            return shlex.split(first[2:].strip()) + [full]
        except ValueError as exc:  # an unclosed quote
            raise SpecError(f"cannot parse the #! line: {exc}", line=1, source=source) from None
    return ["/bin/sh", full]


def script_path(path: str, *, cwd: str | None = None) -> str:
    """A script's absolute path, as its job's command names it."""
    return os.path.normpath(os.path.join(os.getcwd() if cwd is None else cwd, path))


# -- reading: never more than a spec can need -------------------------------------

def _read_job_file(full: str, path: str) -> str:
    """A YAML job file, refused unread past MAX_SPEC_BYTES."""
    data = _read(full, path, MAX_SPEC_BYTES)
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError(f"larger than {size_text(MAX_SPEC_BYTES)}, the limit for a job file", source=path)
    return _decoded(data, path)


def _read_script(full: str, path: str) -> bytes:
    """A batch script, refused unread past MAX_SCRIPT_BYTES: its job keeps it."""
    data = _read(full, path, MAX_SCRIPT_BYTES)
    if len(data) > MAX_SCRIPT_BYTES:
        raise SpecError(f"larger than {size_text(MAX_SCRIPT_BYTES)}, the limit for a batch script (its job keeps "
                        "a copy): run a larger program from a short script", source=path)
    return data


@dataclass(frozen=True)
class SentFile:
    """A job file or batch script as the submitter's own process read it (the light client,
    cli/job_file.py): its bytes (at most a limit and one), whether the submitter may execute
    it, or why it could not be read (`error`, the message to give)."""

    data: bytes = b""
    executable: bool = False
    error: str | None = None


_SENT: ContextVar[Mapping[str, SentFile] | None] = ContextVar("gqa_sent_files", default=None)


@contextmanager
def files_sent(files: Mapping[str, SentFile]) -> Iterator[None]:
    """Within it the loader opens no file: a job file or script is taken from `files` (by the
    path as the submitter gave it), and a path not there is refused. For a process that builds
    specs for others (the queue daemon, often root), which must never read a file with more
    rights than its caller: the caller's own process reads it and sends the bytes."""
    token = _SENT.set(dict(files))
    try:
        yield
    finally:
        _SENT.reset(token)


def _sent(path: str) -> SentFile | None:
    """The file the submitter sent for `path`; None where this process reads files itself."""
    sent = _SENT.get()
    if sent is None:
        return None
    given = sent.get(path)
    if given is None:
        raise SpecError(f"{path} did not come with the submission, and the queue daemon opens no file for "
                        "its callers: submit it with a gqa as new as the daemon")
    if given.error is not None:
        raise SpecError(given.error)
    return given


def _read(full: str, path: str, limit: int) -> bytes:
    """At most `limit` + 1 bytes of the job file or script `path` (`full`: where it is)."""
    given = _sent(path)
    if given is not None:
        return given.data[:limit + 1]
    return read_regular(full, path, limit)


def _executable(full: str, path: str) -> bool:
    given = _sent(path)
    return given.executable if given is not None else os.access(full, os.X_OK)


def read_regular(full: str, path: str, limit: int) -> bytes:
    """At most `limit` + 1 bytes of a regular file, never waiting on a FIFO or a device
    (regular_file.py); SpecError names `path` (as the user gave it)."""
    try:
        return regular_file.read_regular(full, path, limit)
    except regular_file.Unreadable as exc:
        raise SpecError(str(exc)) from None


def _read_header(opened, path: str) -> str:
    """A script's first lines, up to the first that is neither blank nor a
    comment (what parse_directives reads)."""
    lines: list[str] = []
    left = MAX_SPEC_BYTES
    with opened as fh:
        if fh.peek(3)[:3] == BOM:
            # the kernel reads no #! past it (the job would run under /bin/sh), and the #SBATCH lines
            # would not start a line: refused, as sbatch refuses it
            raise SpecError(f"{path} starts with a UTF-8 byte order mark, which a script cannot have: save it "
                            "without one (e.g. sed -i '1s/^\\xEF\\xBB\\xBF//' FILE)")
        while chunk := fh.readline(left + 1):
            line = chunk.decode("utf-8", errors="replace")
            stripped = line.strip()
            if stripped and not stripped.startswith("#"):
                break  # the first command, unread past here: the header is over
            if len(chunk) > left:
                raise SpecError(f"the #GQA/#SBATCH header is larger than {size_text(MAX_SPEC_BYTES)}",
                                source=path)
            left -= len(chunk)
            lines.append(_decoded(chunk, path))
    return "".join(lines)


BOM = b"\xef\xbb\xbf"


def _decoded(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError(f"{path} is not a text file") from None
