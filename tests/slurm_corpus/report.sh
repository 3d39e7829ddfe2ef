#!/bin/bash
#SBATCH --job-name=report
#SBATCH --time=5

# Runs after training ends, however it ended (--dependency=afterany:ID).
files=$(cd results && ls prep.txt train.txt 2>/dev/null)
echo $files > results/report.txt
