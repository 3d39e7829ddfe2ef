#!/bin/bash
#SBATCH --job-name=broken
#SBATCH --gres=gpu:1
#SBATCH -t 5

# The training step fails; the script goes on, as batch scripts do.
srun python3 -c 'import sys; print("training..."); sys.exit(3)'
echo "cleanup after the step" > results/cleanup.txt
