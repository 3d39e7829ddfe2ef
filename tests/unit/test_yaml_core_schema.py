"""Job files are read by YAML 1.2's core schema, not YAML 1.1's: what people
write reaches the job as written (a Slurm-style `1:30:00` is a time, not the
sexagesimal 5400 minutes; `0755` is not octal; `no` is not a boolean), and
a number keeps the text it was written as where it becomes text (an
environment value, a sweep's value)."""

import pytest

from gqa.models.expand import expand
from gqa.models.loader import parse_yaml, validate
from gqa.models.safe_yaml import load


def spec_of(text: str):
    raw, lines = parse_yaml("command: [python, train.py]\n" + text, source="job.yaml")
    return validate(raw, lines=lines, source="job.yaml")


@pytest.mark.parametrize("scalar, value", [
    ("1:30:00", "1:30:00"), ("0755", 755), ("00123", 123), ("0o17", 15), ("0x1F", 31), ("-12", -12),
    ("1.10", 1.1), ("1e-4", 0.0001), ("3.", 3.0), ("-.5", -0.5), (".inf", float("inf")),
    ("true", True), ("False", False), ("no", "no"), ("on", "on"), ("yes", "yes"), ("1_000", "1_000"),
    ("~", None), ("null", None),
])
def test_scalars_resolve_by_the_core_schema(scalar, value):
    data, _ = load(f"v: {scalar}\n")
    assert data["v"] == value and isinstance(data["v"], bool) == isinstance(value, bool)


@pytest.mark.parametrize("scalar", ["0755", "00123", "1.10", "1e-4", "0x1F", "-0.50"])
def test_a_number_keeps_the_text_it_was_written_as(scalar):
    data, _ = load(f"v: {scalar}\n")
    assert data["v"].yaml_text == scalar


@pytest.mark.parametrize("wall_time, seconds", [
    ("1:30:00", 5400),          # H:MM:SS as Slurm reads it (YAML 1.1: 5400, read as minutes: 90 hours)
    ("1-00:00:00", 86400),
    ("90", 5400),               # a bare number is minutes, as in Slurm
    ("4h", 14400),
])
def test_a_wall_time_means_what_slurm_means(wall_time, seconds):
    assert spec_of(f"limits: {{wall_time: {wall_time}}}\n").limits.wall_time == seconds


def test_environment_values_are_the_text_written():
    env = spec_of("env: {A: 1.10, B: 0755, C: 00123, D: 1e-4, E: no, F: true, G: 7}\n").env
    assert env == {"A": "1.10", "B": "0755", "C": "00123", "D": "1e-4", "E": "no", "F": "true", "G": "7"}


def test_a_sweeps_values_reach_the_command_as_written():
    swept = spec_of("sweep: {grid: {lr: [1e-4, 3.0e-4], port: [0755], amp: [yes, false], bs: [16]}}\n")
    commands = [job.command[2:] for job, _, _ in expand(swept)]
    assert commands == [["--lr=1e-4", "--port=0755", "--amp=yes", "--bs=16"],
                        ["--lr=1e-4", "--port=0755", "--amp=false", "--bs=16"],
                        ["--lr=3.0e-4", "--port=0755", "--amp=yes", "--bs=16"],
                        ["--lr=3.0e-4", "--port=0755", "--amp=false", "--bs=16"]]


def test_on_and_no_are_keys_and_words_not_booleans():
    assert spec_of("tags: {on: push, no: x}\n").tags == {"on": "push", "no": "x"}
    assert spec_of("spot: true\n").spot is True
