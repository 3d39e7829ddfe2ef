"""The GPUs of this machine, as `gqa local start` finds them."""

from __future__ import annotations

import subprocess


def discover_gpus() -> list[tuple[int, str]]:
    """(index, type) of the NVIDIA GPUs here, from nvidia-smi; [] when there are none."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in out.strip().splitlines():
        index, _, name = line.partition(",")
        if index.strip().isdigit():
            gpus.append((int(index), gpu_type_name(name.strip())))
    return gpus


def gpu_type_name(product: str) -> str:
    """`NVIDIA A10G` -> `a10g`, `NVIDIA H100 80GB HBM3` -> `h100`."""
    words = product.lower().replace("nvidia", "").replace("tesla", "").replace("geforce", "").split()
    return words[0] if words else "gpu"
