#!/usr/bin/env bash
# Records the Slurm accounting dumps in this folder from a real Slurm with accounting (slurmdbd), one
# node and 4 GPUs as GRES, accounts teamA and teamB, QOS normal, high and low: a small workload with
# every case the sacct reader handles (array tasks, a time-out, a failure, a job cancelled waiting and
# one running, a requeue, a CPU-only job, no time limit, a start held back by --begin, a job still
# running and one still waiting at the dump), then `sacct` as the README tells users to run it. Run it
# as a user Slurm lets submit to those accounts; it takes about four minutes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"; cd "$work"
began="$(date +%Y-%m-%dT%H:%M:%S)"
sub() { sbatch --parsable -o /dev/null "$@"; }
running() { until [ "$(squeue -h -j "$1" -o %T)" = RUNNING ]; do sleep 1; done; }

sub -J "train resnet" -A teamA --gres=gpu:1 -t 5 --wrap 'sleep 12'
sub -J sweep -A teamA --gres=gpu:1 -t 0:02:00 --array=0-5 --wrap 'sleep $((3 + SLURM_ARRAY_TASK_ID))'
sub -J eval -A teamB --qos=high --gres=gpu:2 -t 10 --wrap 'sleep 20'
sub -J big -A teamB --qos=low --gres=gpu:4 -t 1-00:00:00 --wrap 'sleep 25'
sub -J overrun -A teamA --gres=gpu:1 -t 1 --wrap 'sleep 600'                 # killed at its limit: TIMEOUT
sub -J crash -A teamB --gres=gpu:1 -t 5 --wrap 'sleep 2; exit 3'              # FAILED
sub -J forever -A teamA --gres=gpu:1 -t UNLIMITED --wrap 'sleep 8'            # no time limit
sub -J cpu-only -A teamB -t 5 --wrap 'sleep 2'                                # asks no GPU
sub -J later -A teamA --gres=gpu:1 -t 5 --begin=now+20 --wrap 'sleep 3'      # eligible 20 s after its submit
never="$(sub -J never -A teamA --gres=gpu:4 -t 5 --wrap 'sleep 1')"          # cancelled waiting behind the rest
sleep 1; scancel "$never"
killed="$(sub -J stopped -A teamB --gres=gpu:1 -t 30 --wrap 'sleep 600')"     # cancelled while it runs
requeued="$(sub -J requeued -A teamA --gres=gpu:1 -t 5 --wrap 'sleep 15')"   # requeued once, then runs again
running "$requeued"; sleep 3; scontrol requeue "$requeued"
running "$killed"; sleep 3; scancel "$killed"
sleep 70                                                                      # past the overrun's minute
until [ "$(sacct -n -X -j "$requeued" -o State | tr -d ' ')" = COMPLETED ]; do sleep 2; done  # its 2nd attempt
running="$(sub -J still-running -A teamA --gres=gpu:1 -t 30 --wrap 'sleep 600')"
running "$running"
pending="$(sub -J still-waiting -A teamB --gres=gpu:4 -t 30 --wrap 'sleep 1')"  # behind still-running
sleep 2
fields=JobID,Submit,Eligible,Start,End,ElapsedRaw,AllocTRES,ReqTRES,TimelimitRaw,Account,QOS,User,JobName,State
sacct -a -X -P -S "$began" -E now -o "$fields" > "$here/allocations.txt"      # as the README says
sacct -a -P -D -S "$began" -E now -o "$fields,Timelimit,Elapsed,Partition" > "$here/steps-and-requeues.txt"
scancel "$running" "$pending"
rm -rf "$work"
echo "wrote $here/allocations.txt and $here/steps-and-requeues.txt"
