#!/bin/bash
#SBATCH --job-name=warned
#SBATCH --gres=gpu:1
#SBATCH --time=1
#SBATCH --signal=B:USR1@55

# Checkpoint when Slurm warns that the time limit is near, then stop cleanly.
trap 'echo "checkpoint at warning" > results/warned.txt; exit 0' USR1
for i in $(seq 1 600); do sleep 0.1; done
echo "never warned" > results/warned.txt
