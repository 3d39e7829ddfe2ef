"""Turn what the user typed into a validated JobSpec: a YAML file, a script
with `#GQA` / `#SBATCH` directives, and command-line flags (flags win).
Every problem becomes one SpecError that names the field, the line and,
for a misspelt field, the nearest valid name."""

import difflib
import json
import os
import shlex
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .errors import SpecError
from .limits import MAX_SPEC_BYTES, size_text
from .priority import Priority
from .spec import NAMED_PROBLEM, SPEC_FIELDS, JobSpec

YAML_SUFFIXES = (".yaml", ".yml")


def load_spec(path: str | None = None, *, overrides: dict[str, Any] | None = None,
              command: list[str] | None = None, warn=None, cwd: str | None = None) -> JobSpec:
    """The spec for `gqa submit [FILE] [flags] [-- CMD...]`.

    `overrides` is a raw (unvalidated) nested dict from flags; `command`, if
    given, replaces the file's command (for a script: extra arguments). `cwd`
    is the submitter's working directory (absolute) when it is not this
    process's: a relative path or workdir is read against it, and it is the
    default workdir."""
    here = os.getcwd() if cwd is None else cwd
    raw: dict[str, Any] = {}
    lines: dict[tuple, int] = {}
    source = None
    if path is not None:
        source = path
        full = os.path.join(here, path)
        if path.endswith(YAML_SUFFIXES):
            raw, lines = parse_yaml(_read_job_file(full, path), source=path)
            if command:
                raw["command"] = command
        else:
            header = _read_header(full, path)
            raw = parse_directives(header, source=path, warn=warn)
            raw["command"] = script_command(path, header, cwd=here) + list(command or [])
            raw.setdefault("name", Path(path).stem or "job")
            raw.setdefault("workdir", here)
    elif command:
        raw["command"] = list(command)
        raw.setdefault("name", Path(command[0]).name or "job")
    else:
        raise SpecError("nothing to run: give a job file, a script, or a command after --")
    merge(raw, overrides or {})
    raw.setdefault("workdir", here)
    if isinstance(raw["workdir"], str):
        raw["workdir"] = os.path.join(here, raw["workdir"].strip())   # relative to the submitter, never to us
    return validate(raw, lines=lines, source=source)


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
    if field == "spec":
        return SpecError(message, line=line, source=source)
    if err["type"] == "enum":
        message = f"must be one of {err['ctx'].get('expected', '')}, got {err['input']!r}"
    return SpecError(f"{field}: {message}", line=line, source=source)


def _real_loc(loc: tuple, raw: Any) -> tuple:
    """The keys and indices of `loc`, without the union branch names pydantic
    adds ("list[str]", "function-after[...]"). A key the user wrote is kept
    even when it looks like one: the input is walked alongside."""
    out: list = []
    node = raw
    for part in loc:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and -len(node) <= part < len(node):
            node = node[part]
        elif isinstance(part, str) and (part == "str" or "[" in part or "(" in part):
            continue
        else:
            node = None
        out.append(part)
    return tuple(out)


def _line_for(loc: tuple, lines: dict[tuple, int]) -> int | None:
    for end in range(len(loc), 0, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge `extra` into `base` (in place); None values in `extra` are ignored."""
    for key, value in extra.items():
        if value is None:
            continue
        if isinstance(value, dict):
            if not isinstance(base.get(key), dict):
                base[key] = {}
            merge(base[key], value)
        else:
            base[key] = value
    return base


# -- scripts with directives -------------------------------------------------

def parse_directives(text: str, *, source: str | None = None, warn=None) -> dict[str, Any]:
    """`#GQA` and `#SBATCH` lines at the top of a script, read as Slurm does:
    until the first line that is neither blank nor a comment."""
    raw: dict[str, Any] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if number == 1 and stripped.startswith("#!"):
            continue
        if stripped and not stripped.startswith("#"):
            break
        for prefix, strict in (("#GQA", True), ("#SBATCH", False)):
            if stripped.startswith(prefix + " ") or stripped == prefix:
                try:
                    args = shlex.split(stripped[len(prefix):], comments=True)
                except ValueError as exc:
                    raise SpecError(f"cannot parse directive: {exc}", line=number, source=source) from None
                _apply_flags(args, raw, strict=strict, line=number, source=source, warn=warn)
    return raw


def script_command(path: str, text: str, *, cwd: str | None = None) -> list[str]:
    """How to run a script: itself when executable, else its #! interpreter, else sh."""
    full = os.path.normpath(os.path.join(os.getcwd() if cwd is None else cwd, path))
    if os.access(full, os.X_OK):
        return [full]
    first = text.splitlines()[0] if text else ""
    if first.startswith("#!"):
        try:
            return shlex.split(first[2:].strip()) + [full]
        except ValueError as exc:  # an unclosed quote
            raise SpecError(f"cannot parse the #! line: {exc}", line=1, source=path) from None
    return ["/bin/sh", full]


# option -> (field path, converter); the converters keep values raw for pydantic
def _gres(value: str) -> dict[str, Any]:
    # gpu:N or gpu:TYPE:N (Slurm GRES syntax)
    parts = value.split(":")
    if parts[0] != "gpu" or len(parts) not in (2, 3):
        raise SpecError(f"unsupported --gres {value!r}: use gpu:N or gpu:TYPE:N")
    out: dict[str, Any] = {"gpus": _int(parts[-1], "--gres")}
    if len(parts) == 3:
        out["gpu_type"] = parts[1]
    return out


def _gpus(value: str) -> dict[str, Any]:
    # N or TYPE:N (Slurm's --gpus)
    if ":" in value:
        gpu_type, _, count = value.rpartition(":")
        return {"gpus": _int(count, "--gpus"), "gpu_type": gpu_type}
    return {"gpus": _int(value, "--gpus")}


def _int(value: str, option: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise SpecError(f"{option} needs a whole number, got {value!r}") from None


def _slurm_mem(value: str) -> str:
    # Slurm's K/M/G/T are binary and a bare number is MiB; say so explicitly.
    text = value.strip()
    if text[-1:].upper() in "KMGT" and text[:-1].replace(".", "", 1).isdigit():
        return text[:-1] + text[-1].upper() + "i"
    return text


_QOS = {**{p.value: p.value for p in Priority}, "urgent": Priority.HIGH.value, "debug": Priority.HIGH.value}

DIRECTIVES: dict[str, Any] = {
    "--gres": lambda v: {"resources": _gres(v)},
    "--gpus": lambda v: {"resources": _gpus(v)},
    "-G": lambda v: {"resources": _gpus(v)},
    "--gpu-type": lambda v: {"resources": {"gpu_type": v}},
    "--time": lambda v: {"limits": {"wall_time": v}},
    "-t": lambda v: {"limits": {"wall_time": v}},
    "--mem": lambda v: {"resources": {"memory": _slurm_mem(v)}},
    "--cpus-per-task": lambda v: {"resources": {"cpus": _int(v, "--cpus-per-task")}},
    "--cpus": lambda v: {"resources": {"cpus": _int(v, "--cpus")}},
    "-c": lambda v: {"resources": {"cpus": _int(v, "-c")}},
    "--job-name": lambda v: {"name": v},
    "--name": lambda v: {"name": v},
    "-J": lambda v: {"name": v},
    "--qos": lambda v: {"priority": _QOS.get(v.lower(), v)},
    "--priority": lambda v: {"priority": v},
    "--team": lambda v: {"team": v},
    "--account": lambda v: {"team": v},
    "-A": lambda v: {"team": v},
    "--array": lambda v: {"array": v},
    "-a": lambda v: {"array": v},
    "--retries": lambda v: {"retries": {"on_error": _int(v, "--retries")}},
}


def _apply_flags(args: list[str], raw: dict[str, Any], *, strict: bool, line: int,
                 source: str | None, warn) -> None:
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--") and "=" in arg:
            option, value = arg.split("=", 1)
        elif arg in DIRECTIVES and i + 1 < len(args):
            option, value = arg, args[i + 1]
            i += 1
        elif len(arg) > 2 and arg[:2] in DIRECTIVES and not arg.startswith("--"):
            option, value = arg[:2], arg[2:]  # -G4, -c8
        else:
            option, value = arg, None
        i += 1
        converter = DIRECTIVES.get(option)
        if converter is not None and value is None:
            if strict:
                raise SpecError(f"#GQA option {option} needs a value", line=line, source=source)
            if warn:
                warn(f"{source or 'script'}:{line}: ignoring #SBATCH {arg} (no value given)")
            continue
        if converter is None:
            if strict:
                near = difflib.get_close_matches(option, list(DIRECTIVES), n=1)
                hint = f"; did you mean {near[0]}?" if near else ""
                raise SpecError(f"unknown #GQA option {arg!r}{hint}", line=line, source=source)
            if warn:
                warn(f"{source or 'script'}:{line}: ignoring #SBATCH {arg} (no gqa equivalent)")
            continue
        try:
            merge(raw, converter(value))
        except SpecError as exc:
            raise SpecError(str(exc), line=line, source=source) from None


# -- reading: never more than a spec can need -------------------------------------

def _read_job_file(full: str, path: str) -> str:
    """A YAML job file, refused unread past MAX_SPEC_BYTES."""
    with _opened(full, path) as fh:
        data = fh.read(MAX_SPEC_BYTES + 1)
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError(f"larger than {size_text(MAX_SPEC_BYTES)}, the limit for a job file", source=path)
    return _decoded(data, path)


def _read_header(full: str, path: str) -> str:
    """A script's first lines, up to the first that is neither blank nor a
    comment (what parse_directives reads): the body may be any size, or binary."""
    lines: list[str] = []
    left = MAX_SPEC_BYTES
    with _opened(full, path) as fh:
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


def _opened(full: str, path: str):
    try:
        return open(full, "rb")
    except (FileNotFoundError, ValueError):  # ValueError: a NUL in the path
        raise SpecError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise SpecError(f"{path} is a directory, not a job file or script") from None
    except OSError as exc:
        raise SpecError(f"cannot read {path}: {exc.strerror}") from None


def _decoded(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError(f"{path} is not a text file") from None
