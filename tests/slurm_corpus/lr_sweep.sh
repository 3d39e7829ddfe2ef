#!/bin/bash
#SBATCH --job-name=lr_sweep
#SBATCH --array=0-3
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=2
#SBATCH --time=00:10:00
#SBATCH -o logs/%x-%A_%a.out
#SBATCH -e logs/%x-%A_%a.err

# One learning rate per array task: the common sweep idiom.
LRS=(1e-4 3e-4 1e-3 3e-3)
LR=${LRS[$SLURM_ARRAY_TASK_ID]}
echo "task=$SLURM_ARRAY_TASK_ID count=$SLURM_ARRAY_TASK_COUNT min=$SLURM_ARRAY_TASK_MIN max=$SLURM_ARRAY_TASK_MAX lr=$LR"
echo "gpus=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .) cpus=$SLURM_CPUS_PER_TASK"
echo "lr=$LR" > "results/lr_${SLURM_ARRAY_TASK_ID}.txt"
echo "a warning on stderr" >&2
