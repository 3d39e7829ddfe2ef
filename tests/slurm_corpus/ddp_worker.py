"""What each DDP rank reads from Slurm before init_process_group."""
import os

rank = int(os.environ["SLURM_PROCID"])
world = int(os.environ["SLURM_NTASKS"])
local = int(os.environ["SLURM_LOCALID"])
devices = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d]
print(f"rank={rank} world={world} local={local} gpus={len(devices)} port_set={'MASTER_PORT' in os.environ}")
