"""gqa.models.expand: Slurm-style arrays and parameter sweeps become many jobs."""

import re

import pytest

from tests.builders import spec
from gqa.models.errors import SpecError
from gqa.models.expand import array_limit, expand, largest_task, parse_array
from gqa.models.spec import Sweep


@pytest.mark.parametrize("text, count, first, last, limit", [
    ("0-499", 500, 0, 499, None),
    ("1,3,5", 3, 1, 5, None),
    ("0-9:2", 5, 0, 8, None),
    ("0-99%10", 100, 0, 99, 10),
    ("0-9:2%3", 5, 0, 8, 3),
    ("7", 1, 7, 7, None),
    ("0-3,10-12", 7, 0, 12, None),
    (" 0-3 ", 4, 0, 3, None),
])
def test_parse_array(text, count, first, last, limit):
    indices, got_limit = parse_array(text)
    assert len(indices) == count
    assert (indices[0], indices[-1]) == (first, last)
    assert got_limit == limit


def test_parse_array_steps_and_lists_exactly():
    assert parse_array("0-9:2") == ([0, 2, 4, 6, 8], None)
    assert parse_array("1,3,5%1") == ([1, 3, 5], 1)


@pytest.mark.parametrize("text, message", [
    ("", "invalid array ''"),
    ("a-b", "invalid array 'a-b': use e.g. 0-499"),
    ("1-", "invalid array '1-'"),
    ("-1", "invalid array '-1'"),
    ("1,,2", "invalid array '1,,2'"),
    ("5-1", "invalid array range '5-1': need 0 <= start <= end"),
    ("0-9:0", "invalid array range '0-9:0'"),
    ("1,1", "array '1,1' repeats an index"),
    ("0-3,2-5", "repeats an index"),
    ("0-9%0", "invalid array limit '%0': use %N with N >= 1"),
    ("0-9%x", "invalid array limit '%x'"),
    ("0-9%", "invalid array limit '%'"),
    ("0-200000", "array '0-200000' has 200001 tasks; at most 100000"),
    ("0-1000000000", "array '0-1000000000' has 1000000001 tasks; at most 100000"),
    ("0-99999,100000", "array '0-99999,100000' has 100001 tasks; at most 100000"),
    ("0-" + "9" * 40, "has more than 10^18 tasks; at most 100000"),
    ("0-9%" + "9" * 40, "invalid array limit"),
    ("4000001", "array '4000001': index 4000001 is past 4,000,000, the largest Slurm takes"),
    ("0-3,9223372036854775808", "is past 4,000,000, the largest Slurm takes"),     # past SQLite's integers
    ("0-9%²", "invalid array limit '%²'"),
    ("1," * 60_000, "invalid array '" + "1," * 28 + "...: use e.g."),   # shown cut short
])
def test_parse_array_rejects(text, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        parse_array(text)


def test_plain_job_expands_to_itself():
    job = spec()
    assert expand(job) == [(job, None, {})]


def test_array_expands_to_one_job_per_index():
    jobs = expand(spec(array="0-9:3%2"))
    assert [index for _, index, _ in jobs] == [0, 3, 6, 9]
    span = {"SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "9", "SLURM_ARRAY_TASK_COUNT": "4",
            "SLURM_ARRAY_TASK_STEP": "3"}
    assert [env for _, _, env in jobs] == [{"GQA_ARRAY_INDEX": str(i), **span} for i in (0, 3, 6, 9)]
    assert all(job.array is None and job.command == ["python", "train.py"] for job, _, _ in jobs)


@pytest.mark.parametrize("array, limit", [("0-9%2", 2), ("0-9", None), (None, None)])
def test_array_limit(array, limit):
    assert array_limit(spec(array=array)) == limit


GRID = {"lr": [0.1, 0.01], "bs": [32, 64], "amp": [True]}


def test_sweep_is_the_grid_product_in_order():
    jobs = expand(spec(sweep={"grid": GRID}))
    assert [index for _, index, _ in jobs] == [0, 1, 2, 3]
    assert [job.tags for job, _, _ in jobs] == [
        {"sweep.lr": lr, "sweep.bs": bs, "sweep.amp": "true"}
        for lr in ("0.1", "0.01") for bs in ("32", "64")
    ]
    span = {"SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "3", "SLURM_ARRAY_TASK_COUNT": "4",
            "SLURM_ARRAY_TASK_STEP": "1"}
    assert [env for _, _, env in jobs] == [{"GQA_ARRAY_INDEX": str(i), **span} for i in range(4)]
    assert all(job.sweep is None for job, _, _ in jobs)


@pytest.mark.parametrize("overrides, index, command, env", [
    ({"sweep": {"grid": GRID}}, 0,
     ["python", "train.py", "--lr=0.1", "--bs=32", "--amp=true"], {}),
    ({"sweep": {"grid": GRID, "pass_as": "args"}}, 3,
     ["python", "train.py", "--lr=0.01", "--bs=64", "--amp=true"], {}),
    ({"sweep": {"grid": {"LR": [0.1, 0.01]}, "pass_as": "env"}, "env": {"SEED": "1"}}, 1,
     ["python", "train.py"], {"SEED": "1", "LR": "0.01"}),
    ({"command": "python train.py", "shell": True, "sweep": {"grid": {"name": ["a b"]}}}, 0,
     "python train.py '--name=a b'", {}),
    ({"command": ["python train.py"], "shell": True, "sweep": {"grid": {"lr": [1]}}}, 0,
     "python train.py --lr=1", {}),
])
def test_sweep_passes_values(overrides, index, command, env):
    job, _, _ = expand(spec(**overrides))[index]
    assert job.command == command
    assert job.env == env


@pytest.mark.parametrize("overrides", [
    {"sweep": {"grid": {"lr": [0.1, 0.0001], "config": ["a", "c" * 40, "b" * 39], "amp": [True, False]}}},
    {"sweep": {"grid": {"LR": ["1", "é" * 3, "abcde"]}, "pass_as": "env"}},       # bytes, not characters
    {"command": "python train.py", "shell": True, "sweep": {"grid": {"x": ["1", "22"]}}},
])
def test_the_largest_task_is_the_sweeps_task_that_takes_the_most_room(overrides):
    def size(job):
        text = str(job.command) + str(sorted(job.env.items())) + str(sorted(job.tags.items()))
        return len(text.encode())

    tasks = [job for job, _, _ in expand(spec(**overrides))]
    largest = largest_task(spec(**overrides))
    assert largest in tasks and size(largest) == max(size(t) for t in tasks)


def test_the_largest_task_of_anything_else_is_the_spec_itself():
    for overrides in ({}, {"array": "0-99"}):
        assert largest_task(spec(**overrides)) == spec(**overrides)


def test_sweep_keeps_existing_tags():
    jobs = expand(spec(tags={"project": "x"}, sweep={"grid": {"lr": [1, 2]}}))
    assert [job.tags for job, _, _ in jobs] == [{"project": "x", "sweep.lr": "1"}, {"project": "x", "sweep.lr": "2"}]


@pytest.mark.parametrize("grid, count", [
    ({"a": list(range(317)), "b": list(range(317))}, "100489"),
    ({f"p{i}": list(range(20)) for i in range(7)}, "1280000000"),
    ({f"p{i}": [0, 1] for i in range(100)}, "more than 10^18"),
])
def test_sweep_too_large_is_refused_at_validation(grid, count):
    with pytest.raises(SpecError, match=re.escape(f"sweep has {count} combinations; at most 100000")):
        spec(sweep={"grid": grid})


def test_expand_counts_a_sweep_before_listing_it():
    # a spec built without validation must still not be expanded past the limit
    grid = {f"p{i}": list(range(20)) for i in range(7)}
    unchecked = spec().model_copy(update={"sweep": Sweep.model_construct(grid=grid, pass_as="args")})
    with pytest.raises(SpecError, match=re.escape("sweep has 1280000000 combinations; at most 100000")):
        expand(unchecked)


def test_array_of_exactly_the_limit_expands():
    assert len(expand(spec(array="0-99999"))) == 100_000


@pytest.mark.parametrize("indices, shown", [
    ([0, 1, 2, 3, 4, 5], "0-5"),
    ([5, 3, 1, 4], "1,3-5"),
    ([7], "7"),
    (list(range(0, 40, 2)), "0,2,4,6,8,10, ... (+14)"),
])
def test_index_ranges_tell_an_arrays_tasks_in_runs(indices, shown):
    from gqa.models.array_syntax import index_ranges

    assert index_ranges(indices) == shown
