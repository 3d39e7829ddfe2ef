"""The GPU instance shapes gqa knows: a listed type's (vCPUs, GPUs); an unlisted one is named, not a TypeError."""

import pytest

from gqa.models.gpu_instances import instance_shape, listed_shape


@pytest.mark.parametrize("instance_type, shape", [("g5.12xlarge", (48, 4)), ("p5.48xlarge", (192, 8))])
def test_a_listed_type_has_its_shape(instance_type, shape):
    assert instance_shape(instance_type) == shape
    assert listed_shape(instance_type) == shape


@pytest.mark.parametrize("instance_type", ["x9.huge", "g5.nosuchsize", "g5"])
def test_an_unlisted_type_is_named_with_the_families_gqa_knows(instance_type):
    assert instance_shape(instance_type) is None
    with pytest.raises(ValueError, match=rf"'{instance_type}' is not a GPU instance type gqa knows \(families .*g5"):
        listed_shape(instance_type)
