"""gqa/models/nested.py: a flag not given changes nothing; one given wins."""

import copy

import pytest

from gqa.models.nested import merge

UNSET_FLAGS = {"resources": {"gpus": None, "cpus": None}, "limits": {"wall_time": None}, "name": None}


@pytest.mark.parametrize("base, extra, merged", [
    # flags not given: what the file holds stands, a scalar or list where a map belongs too (validation refuses it)
    ({"limits": "4h"}, UNSET_FLAGS, {"limits": "4h"}),
    ({"resources": 3}, UNSET_FLAGS, {"resources": 3}),
    ({"resources": [1, 2]}, UNSET_FLAGS, {"resources": [1, 2]}),
    ({"resources": {"gpus": 2}}, UNSET_FLAGS, {"resources": {"gpus": 2}}),
    ({}, UNSET_FLAGS, {}),
    ({"limits": "4h"}, {"limits": {}}, {"limits": "4h"}),
    ({"a": 1}, {"a": {"b": {"c": None}}}, {"a": 1}),
    # flags given: they win, as before
    ({"limits": "4h"}, {"limits": {"wall_time": "1h"}}, {"limits": {"wall_time": "1h"}}),
    ({"resources": 3}, {"resources": {"gpus": 2, "cpus": None}}, {"resources": {"gpus": 2}}),
    ({"resources": {"gpus": 1, "cpus": 4}}, {"resources": {"gpus": 2, "cpus": None}},
     {"resources": {"gpus": 2, "cpus": 4}}),
    ({}, {"limits": {"wall_time": "1h"}}, {"limits": {"wall_time": "1h"}}),
    ({"a": 1}, {"a": {"b": {"c": 0}}}, {"a": {"b": {"c": 0}}}),
    ({"name": "x"}, {"name": "y"}, {"name": "y"}),
    ({"shell": True}, {"shell": False}, {"shell": False}),     # a false value is a value
    ({"env": {"A": "1"}}, {"env": None}, {"env": {"A": "1"}}),
])
def test_merge(base, extra, merged):
    given = copy.deepcopy(extra)
    assert merge(base, extra) == merged and merge(base, extra) is base
    assert extra == given
