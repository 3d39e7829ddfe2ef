"""gqa.models.units: durations and sizes as people write them, and back."""

import re

import pytest

from gqa.models.errors import SpecError
from gqa.models.units import format_count, format_duration, format_size, parse_duration, parse_size

MIN, HOUR, DAY = 60, 3600, 86400
KiB, MiB, GiB, TiB = 1024, 1024**2, 1024**3, 1024**4


@pytest.mark.parametrize("text, seconds", [
    ("90m", 90 * MIN),
    ("4h", 4 * HOUR),
    ("1d", DAY),
    ("1w", 7 * DAY),
    ("30s", 30),
    ("2h30m", 2 * HOUR + 30 * MIN),
    ("2h 30m", 2 * HOUR + 30 * MIN),
    ("1.5h", 90 * MIN),
    ("90 min", 90 * MIN),
    ("4H", 4 * HOUR),
    # Slurm --time forms
    ("1:30:00", 90 * MIN),            # HH:MM:SS
    ("10:30", 10 * MIN + 30),         # MM:SS
    ("1-12:00:00", DAY + 12 * HOUR),  # D-HH:MM:SS
    ("1-12", DAY + 12 * HOUR),        # D-HH
    ("2-00:30", 2 * DAY + 30 * MIN),  # D-HH:MM
    # a bare number is minutes, as in Slurm
    ("45", 45 * MIN),
    (45, 45 * MIN),
    (1.5, 90),
])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


def test_bare_unit_can_be_seconds():
    assert parse_duration("45", bare_unit="s") == 45
    assert parse_duration(45, bare_unit="s") == 45


@pytest.mark.parametrize("value, message", [
    ("0", "must be positive"),
    (0, "must be positive"),
    ("0m", "must be positive"),
    ("0:00:00", "must be positive"),
    (-5, "must be positive"),
    ("-5", "invalid duration '-5'"),
    ("0.2s", "at least 1s"),
    ("", "empty duration"),
    ("   ", "empty duration"),
    ("forever", "invalid duration 'forever'; use e.g. 90m"),
    ("5x", "unknown unit 'x'"),
    ("2h30", "invalid duration '2h30'"),
    ("1:2:3:4", "invalid duration"),
    ("1h-30m", "invalid duration"),
    ("36501d", "duration '36501d' is too large; at most 36500d (100 years)"),
    ("99999999999999999d", "is too large"),        # past SQLite's integers, once in seconds
    (10**20, "is too large"),
    (True, "invalid duration True"),
    (None, "invalid duration None"),
])
def test_parse_duration_rejects(value, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        parse_duration(value)


@pytest.mark.parametrize("text, size", [
    ("16Gi", 16 * GiB),
    ("512Mi", 512 * MiB),
    ("1.5Ti", int(1.5 * TiB)),
    ("4Ki", 4 * KiB),
    ("64G", 64 * 10**9),
    ("512M", 512 * 10**6),
    ("16GB", 16 * 10**9),
    ("16Gib", 16 * GiB),
    ("16 Gi", 16 * GiB),
    ("16gi", 16 * GiB),
    ("100B", 100),
    # a bare number is MiB, as in Slurm's --mem
    ("512", 512 * MiB),
    (512, 512 * MiB),
    ("0.5", MiB // 2),
])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("value, message", [
    ("lots", "invalid size 'lots'; use e.g. 16Gi"),
    ("16Xi", "invalid size"),
    ("", "invalid size"),
    ("-1", "invalid size '-1'"),
    ("0", "size must be positive"),
    (0, "size must be positive"),
    (True, "invalid size True"),
])
def test_parse_size_rejects(value, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        parse_size(value)


@pytest.mark.parametrize("seconds, text", [
    (None, "-"),
    (0, "0s"),
    (45, "45s"),
    (59.6, "1m00s"),
    (60, "1m00s"),
    (61, "1m01s"),
    (3599, "59m59s"),
    (3600, "1h00m"),
    (3720, "1h02m"),
    (86399, "23h59m"),
    (86400, "1d00h"),
    (3 * DAY + 4 * HOUR, "3d04h"),
    (-5, "0s"),
])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


@pytest.mark.parametrize("size, text", [
    (None, "-"),
    (0, "0B"),
    (1023, "1023B"),
    (1024, "1Ki"),
    (1536, "1.5Ki"),
    (512 * MiB, "512Mi"),
    (16 * GiB, "16Gi"),
    (int(1.5 * TiB), "1.5Ti"),
])
def test_format_size(size, text):
    assert format_size(size) == text


@pytest.mark.parametrize("text", ["90m", "4h", "1d", "2h30m", "1-12:00:00"])
def test_formatted_duration_parses_back(text):
    seconds = parse_duration(text)
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize("text", ["16Gi", "512Mi", "1.5Ti", "4Ki"])
def test_formatted_size_parses_back(text):
    size = parse_size(text)
    assert parse_size(format_size(size)) == size


@pytest.mark.parametrize("n, noun, plural, text", [
    (0, "job", None, "0 jobs"), (1, "job", None, "1 job"), (2, "job", None, "2 jobs"),
    (12000, "job", None, "12,000 jobs"), (1, "job step", None, "1 job step"), (3, "GPU", None, "3 GPUs"),
    (2, "child", "children", "2 children"), (1, "child", "children", "1 child"),
])
def test_format_count_puts_the_noun_in_the_number_it_takes(n, noun, plural, text):
    assert format_count(n, noun, plural) == text
