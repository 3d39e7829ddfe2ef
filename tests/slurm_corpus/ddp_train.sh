#!/bin/bash
#SBATCH -J ddp
#SBATCH -N 1
#SBATCH -n 4
#SBATCH --gpus-per-task 1
#SBATCH -c 1
#SBATCH -t 0:10:00
#SBATCH -o %x-%j.out

# The single-node DDP launch from most cluster templates.
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_PORT=$((10000 + SLURM_JOB_ID % 10000))
echo "master=$MASTER_ADDR tasks=$SLURM_NTASKS nodes=$SLURM_NNODES"
srun python3 ddp_worker.py | sort > results/ddp.txt
