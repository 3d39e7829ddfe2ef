#!/bin/bash
#SBATCH --job-name=train
#SBATCH --gpus=1
#SBATCH --time=10
#SBATCH --output=logs/train-%j.out

# Runs after preprocess.sh succeeded (submitted with --dependency=afterok:ID).
set -euo pipefail
test -s data/clean.txt
echo "trained on $(wc -l < data/clean.txt) rows" > results/train.txt
