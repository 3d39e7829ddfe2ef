"""The GPU instance types a pool may name, with their vCPUs and GPUs: a
deployment file is checked against them (an unknown type is refused with its
line), and the Batch pools size their vCPU ceilings from them. A new family
is one line here."""

from __future__ import annotations

_G_SIZES = {"xlarge": (4, 1), "2xlarge": (8, 1), "4xlarge": (16, 1), "8xlarge": (32, 1), "16xlarge": (64, 1),
            "12xlarge": (48, 4), "24xlarge": (96, 4), "48xlarge": (192, 8)}
INSTANCE_SHAPES: dict[str, dict[str, tuple[int, int]]] = {
    "g4dn": {**{k: v for k, v in _G_SIZES.items() if k not in ("24xlarge", "48xlarge")}, "metal": (96, 8)},
    "g5": _G_SIZES,
    "g6": _G_SIZES,
    "g6e": _G_SIZES,
    "p3": {"2xlarge": (8, 1), "8xlarge": (32, 4), "16xlarge": (64, 8)},
    "p3dn": {"24xlarge": (96, 8)},
    "p4d": {"24xlarge": (96, 8)},
    "p4de": {"24xlarge": (96, 8)},
    "p5": {"4xlarge": (16, 1), "48xlarge": (192, 8)},
    "p5e": {"48xlarge": (192, 8)},
    "p5en": {"48xlarge": (192, 8)},
}
AL2_ONLY_FAMILIES = frozenset({"p3", "p3dn"})   # the AL2023 GPU AMI does not run V100 instances


def instance_shape(instance_type: str) -> tuple[int, int] | None:
    """(vCPUs, GPUs) of an instance type, e.g. g5.12xlarge -> (48, 4); None for one not listed."""
    family, _, size = instance_type.partition(".")
    return INSTANCE_SHAPES.get(family, {}).get(size)


def listed_shape(instance_type: str) -> tuple[int, int]:
    """instance_shape of a type the deployment has already checked is listed."""
    shape = instance_shape(instance_type)
    if shape is None:
        raise ValueError(f"{instance_type!r} is not a GPU instance type gqa knows (families {known_families()})")
    return shape


def known_families() -> str:
    return ", ".join(sorted(INSTANCE_SHAPES))
