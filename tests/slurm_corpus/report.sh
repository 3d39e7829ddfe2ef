#!/bin/bash
#SBATCH --job-name=report
#SBATCH --time=5

# Runs after training ends, however it ended (--dependency=afterany:ID).
files=$(ls results/ | sort)
echo $files > results/report.txt
