#!/bin/bash
#SBATCH --job-name=mig-eval
#SBATCH --gres=gpu:1g.10gb:1
#SBATCH --time=5

echo "mig gpus=$SLURM_GPUS_ON_NODE" > results/mig.txt
