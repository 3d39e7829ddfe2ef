"""A tier's name and its rank are spelled once (gqa.models.priority)."""

import pytest

from gqa.models.priority import Priority


@pytest.mark.parametrize("name, rank", [("high", 0), ("normal", 1), ("low", 2)])
def test_a_tier_and_its_rank_stand_for_each_other(name, rank):
    assert Priority(name).rank == rank
    assert Priority.of_rank(rank) is Priority(name)


@pytest.mark.parametrize("rank", [-1, 3])
def test_a_rank_no_tier_has_is_refused_with_the_ranks_there_are(rank):
    with pytest.raises(ValueError, match=f"rank {rank}; ranks are 0 \\(high\\)"):
        Priority.of_rank(rank)


def test_the_spec_names_the_same_enum():
    from gqa.models import spec

    assert spec.Priority is Priority
    assert spec.JobSpec.model_validate({"command": ["true"], "priority": "low"}).priority is Priority.LOW
