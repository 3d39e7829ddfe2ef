"""load_spec on generated input: whatever a file holds, the answer is a
JobSpec or one SpecError of one line, never another exception, and it comes
within a bound of time and memory. The daemon loads specs for its clients, so
a file that breaks this property breaks the queue for everyone."""

import string
import time
import tracemalloc

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gqa.models.errors import SpecError
from gqa.models.limits import MAX_TASKS, MAX_YAML_DEPTH, MAX_YAML_NODES
from gqa.models.loader import load_spec
from gqa.models.sbatch import GQA, SBATCH
from gqa.models.spec import SPEC_FIELDS, JobSpec

CPU_SECONDS = 2.0        # the work one load may do (CPU time: other tests share the machine)
WALL_SECONDS = 10.0      # and it must not wait on anything either
PEAK_BYTES = 64 << 20    # traced allocations at their peak

FUZZ = settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
HEAVY = settings(deadline=None, max_examples=12, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def load_bounded(path, overrides=None) -> JobSpec | SpecError:
    """load_spec(path) under the property: the spec, or the SpecError it raised."""
    tracemalloc.start()
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        outcome = load_spec(str(path), overrides={"owner": "alice"} if overrides is None else overrides)
    except SpecError as exc:
        outcome = exc
    finally:
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert cpu < CPU_SECONDS and wall < WALL_SECONDS, f"took {cpu:.2f}s CPU, {wall:.2f}s wall"
    assert peak < PEAK_BYTES, f"peak {peak >> 20} MiB"
    if isinstance(outcome, SpecError):
        message = str(outcome)
        assert message and "\n" not in message and "\r" not in message, repr(message)
    else:
        assert isinstance(outcome, JobSpec)
    return outcome


def write(home, name: str, data: str | bytes):
    path = home / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8", errors="surrogatepass")
    return path


def refusal(outcome) -> str:
    assert isinstance(outcome, SpecError), f"accepted: {outcome!r}"
    return str(outcome)


# -- generated documents -------------------------------------------------------------

FIELD_NAMES = sorted({f"{prefix}.{name}".lstrip(".") for prefix, model in SPEC_FIELDS.items()
                      for name in model.model_fields})
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=-2**70, max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30),
    st.sampled_from(["0-9", "1h", "90m", "16Gi", "a10g", "high", "env", "args", "true", "~", "1e400", "0x1F",
                     "1:20:30", "2024-13-45", "python", "/tmp", "\x00", "A=B", ""]),
)
keys = st.one_of(st.sampled_from([name.rpartition(".")[2] for name in FIELD_NAMES]), st.text(max_size=8))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(keys, inner, max_size=5),
                      max_leaves=40)
documents = st.dictionaries(keys, values, max_size=10)


@FUZZ
@given(document=documents)
def test_any_yaml_mapping(home, document):
    load_bounded(write(home, "job.yaml", yaml.safe_dump(document, allow_unicode=True)))


@FUZZ
@given(document=st.fixed_dictionaries({"command": st.lists(st.text(max_size=10), max_size=4) | st.text(max_size=10)},
                                      optional={name: values for name in SPEC_FIELDS[""].model_fields
                                                if name != "command"}))
def test_spec_shaped_yaml(home, document):
    load_bounded(write(home, "job.yaml", yaml.safe_dump(document, allow_unicode=True)))


TOKENS = ["[", "]", "{", "}", ": ", ":", "- ", "-", " ", "  ", "\n", "\t", ",", "?", "#", "'", '"', "|", ">", "!",
          "&a ", "*a", "&b ", "*b", "<<: ", "!!int ", "!!str ", "!!binary ", "!!set ", "!!python/object ", "---",
          "...", "%YAML 1.1\n", "%TAG ! x\n", "\\0", "\\x00", "\\u0000", "\\ud800", "\x00", "\x85", "\u2028",
          "\ufeff", "command", "command: [x]\n", "gpus", "1", "1.5", "0x", "1e999", "2024-02-30", "true", "~", "x"]


@FUZZ
@given(text=st.lists(st.sampled_from(TOKENS), max_size=60).map("".join))
def test_yaml_token_soup(home, text):
    load_bounded(write(home, "job.yaml", text))


@FUZZ
@given(text=st.text(max_size=300))
def test_random_text(home, text):
    load_bounded(write(home, "job.yaml", text))


@FUZZ
@given(data=st.binary(max_size=300), lenient=st.booleans())
def test_random_bytes(home, data, lenient):
    load_bounded(write(home, "job.yaml", data.decode("utf-8", errors="replace") if lenient else data))


# -- what exhausted the daemon -------------------------------------------------------

def alias_bomb(width: int, depth: int) -> str:
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, depth)]
    return "tags:\n" + "".join(f"  {line}\n" for line in lines) + "command: [x]\n"


@pytest.mark.slow
@HEAVY
@given(width=st.integers(2, 40), depth=st.integers(1, 30))
def test_alias_bombs(home, width, depth):
    message = refusal(load_bounded(write(home, "job.yaml", alias_bomb(width, depth))))
    last = width + 1                      # the values the last anchor stands for
    for _ in range(1, depth):
        last = 1 + width * last
    if last > MAX_YAML_NODES:
        assert f"more than {MAX_YAML_NODES} values" in message


def nesting(kind: str, depth: int) -> str:
    if kind == "flow list":
        return "command: [x]\ntags: " + "[" * depth + "]" * depth + "\n"
    if kind == "flow map":
        return "command: [x]\ntags: " + "{a: " * depth + "b" + "}" * depth + "\n"
    if kind == "block list":
        return "command: [x]\ntags:\n" + "- " * depth + "x\n"
    return "command: [x]\ntags:\n" + "".join(" " * i + "a:\n" for i in range(1, depth)) + " " * depth + "a: b\n"


# the deepest of each kind within the file size limit (a block map's indentation grows with depth)
DEEPEST = {"flow list": 100_000, "flow map": 50_000, "block list": 100_000, "block map": 700}


@pytest.mark.slow
@HEAVY
@given(kind_and_depth=st.sampled_from(sorted(DEEPEST)).flatmap(
    lambda kind: st.tuples(st.just(kind), st.integers(1, DEEPEST[kind]))))
def test_deep_nesting(home, kind_and_depth):
    kind, depth = kind_and_depth
    outcome = load_bounded(write(home, "job.yaml", nesting(kind, depth)))
    if depth + 1 > MAX_YAML_DEPTH:          # the root mapping is a level
        assert f"nested deeper than {MAX_YAML_DEPTH} levels" in refusal(outcome)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(DEEPEST))
def test_nesting_as_deep_as_fits(home, kind):
    message = refusal(load_bounded(write(home, "job.yaml", nesting(kind, DEEPEST[kind]))))
    assert f"nested deeper than {MAX_YAML_DEPTH} levels" in message


@FUZZ
@given(sizes=st.lists(st.integers(1, 60), min_size=1, max_size=8))
def test_sweep_grids(home, sizes):
    grid = "".join(f"    p{i}: [{', '.join(str(v) for v in range(n))}]\n" for i, n in enumerate(sizes))
    outcome = load_bounded(write(home, "job.yaml", "command: [x]\nsweep:\n  grid:\n" + grid))
    combinations = 1
    for n in sizes:
        combinations *= n
    if combinations > MAX_TASKS:
        assert f"sweep has {combinations} combinations; at most {MAX_TASKS}" in refusal(outcome)
    else:
        assert isinstance(outcome, JobSpec)


ranges = st.tuples(st.integers(0, 10**12), st.integers(0, 10**12), st.integers(1, 10**6)).map(
    lambda r: f"{min(r[:2])}-{max(r[:2])}:{r[2]}")


@FUZZ
@given(parts=st.lists(ranges | st.integers(0, 10**12).map(str), min_size=1, max_size=6),
       limit=st.none() | st.integers(0, 10**20))
def test_arrays(home, parts, limit):
    array = ",".join(parts) + ("" if limit is None else f"%{limit}")
    outcome = load_bounded(write(home, "job.yaml", f"command: [x]\narray: '{array}'\n"))
    if isinstance(outcome, SpecError) and "tasks; at most" in str(outcome):
        assert f"at most {MAX_TASKS}" in str(outcome)


# -- values no job can start with ----------------------------------------------------

def with_nul(text: str, at: int) -> str:
    at %= len(text) + 1
    return text[:at] + "\x00" + text[at:]


STRING_FIELDS = {
    # where a string goes in a spec -> the spec holding `s` there
    "command item": lambda s: {"command": ["python", s]},
    "first command item": lambda s: {"command": [s]},
    "shell command": lambda s: {"command": s, "shell": True},
    "workdir": lambda s: {"command": ["x"], "workdir": "/" + s},
    "env name": lambda s: {"command": ["x"], "env": {"A" + s: "1"}},
    "env value": lambda s: {"command": ["x"], "env": {"A": s}},
    "name": lambda s: {"command": ["x"], "name": s},
    "team": lambda s: {"command": ["x"], "team": s},
    "owner": lambda s: {"command": ["x"], "owner": s},
    "tag name": lambda s: {"command": ["x"], "tags": {s: "v"}},
    "tag value": lambda s: {"command": ["x"], "tags": {"k": s}},
    "image": lambda s: {"command": ["x"], "image": s},
    "gpu type": lambda s: {"command": ["x"], "resources": {"gpu_type": s}},
    "memory": lambda s: {"command": ["x"], "resources": {"memory": s}},
    "wall time": lambda s: {"command": ["x"], "limits": {"wall_time": s}},
    "priority": lambda s: {"command": ["x"], "priority": s},
    "array": lambda s: {"command": ["x"], "array": s},
    "sweep parameter": lambda s: {"command": ["x"], "sweep": {"grid": {s: [1]}}},
    "sweep value": lambda s: {"command": ["x"], "sweep": {"grid": {"p": [1, s]}}},
}


@FUZZ
@given(where=st.sampled_from(sorted(STRING_FIELDS)), text=st.text(string.printable, max_size=12),
       at=st.integers(0, 20))
def test_a_nul_in_any_string_is_refused(home, where, text, at):
    spec = STRING_FIELDS[where](with_nul(text, at))
    if "owner" not in spec:
        spec["owner"] = "alice"
    refusal(load_bounded(write(home, "job.yaml", yaml.safe_dump(spec)), overrides={}))


@FUZZ
@given(document=st.dictionaries(st.sampled_from(["name", "team", "command", "spot", "image", "priority"]),
                                st.sampled_from(["a", "'b'", "[x]", "true", "1"]), min_size=1),
       repeat=st.data())
def test_a_key_given_twice_is_refused(home, document, repeat):
    lines = [f"{key}: {value}" for key, value in document.items()]
    twice = repeat.draw(st.sampled_from(sorted(document)))
    at = repeat.draw(st.integers(0, len(lines)))
    lines.insert(at, f"{twice}: {document[twice]}")
    nested = repeat.draw(st.booleans())
    text = ("resources:\n" + "".join(f"  {line}\n" for line in lines) + "command: [x]\n" if nested
            else "\n".join(lines) + "\n")
    assert f"duplicate key '{twice}'" in refusal(load_bounded(write(home, "job.yaml", text)))


# -- scripts -------------------------------------------------------------------------

directive_args = st.one_of(
    st.sampled_from(sorted({**SBATCH, **GQA})).flatmap(
        lambda option: st.sampled_from(["2", "gpu:2", "gpu:a10g:1", "1:00:00", "16G", "x", "", "0-9%2", "high",
                                        "'a b'", '"', "\\", "\x00"]).map(
            lambda value: f"{option}={value}" if option.startswith("--") else f"{option} {value}")),
    st.text(string.printable, max_size=12),
)
directive_lines = st.tuples(st.sampled_from(["#SBATCH", "#GQA", "#", "", "echo", "#!"]),
                            st.lists(directive_args, max_size=4)).map(lambda t: " ".join([t[0], *t[1]]))


@FUZZ
@given(shebang=st.sampled_from(["", "#!/bin/sh\n", "#!/usr/bin/env python3 -u\n", "#!\n", "#!'\n", "#!\x00\n"]),
       lines=st.lists(directive_lines, max_size=8), body=st.binary(max_size=64))
def test_scripts_with_random_directives(home, shebang, lines, body):
    header = (shebang + "\n".join(lines) + "\n").encode("utf-8", errors="surrogatepass")
    load_bounded(write(home, "run.sh", header + body))
