#!/bin/bash
#SBATCH --job-name=prep
#SBATCH --cpus-per-task=2
#SBATCH --mem-per-cpu=64M
#SBATCH --time=5

# A CPU-only step: no GPU asked for.
set -euo pipefail
mkdir -p data
seq 1 100 > data/clean.txt
echo "prep gpus=[${CUDA_VISIBLE_DEVICES:-}] cpus=$SLURM_CPUS_PER_TASK nproc=$(nproc) omp=${OMP_NUM_THREADS:-unset}" > results/prep.txt
