#!/usr/bin/env bash
# `make slurm-test`: the smoke study submitted to a real SLURM scheduler on
# this one machine, through profiles/slurm.
#
# Installs slurm-wlm and munge from Debian's packages if they are missing
# (needs root), starts munged, slurmctld and slurmd directly (no systemd) from
# a private configuration in a temporary directory (node = this host,
# proctrack/linuxproc, task/none, one fake GPU: gres File=/dev/null), submits
# the study, then checks that every run record arrived, that the scheduler ran
# the jobs (squeue, and the job-completion log), that a GPU request is
# accepted, and that a training step sent USR1 saves and resumes
# (tools/slurm/usr1.py); then the example plugin's study (examples/hyena), so
# that a SLURM job imports a plugin. Every daemon it started is stopped by its
# PID on exit.
#   STUDY=config/studies/smoke.yaml   the preset to submit
#   KEEP=1                            keep the state directory (logs) afterwards
set -euo pipefail
cd "$(dirname "$0")/../.."

STUDY=${STUDY:-config/studies/smoke.yaml}
NAME=slurm_smoke                       # results/slurm_smoke/, apart from a local smoke run
STATE=$(mktemp -d /tmp/scalestudy-slurm.XXXXXX)
PIDS=()

say() { echo "slurm-test: $*"; }

stop() {
    status=$?
    if [ ${#PIDS[@]} -gt 0 ]; then
        scancel --full --quiet --state=PENDING,RUNNING "--partition=debug" 2>/dev/null || true
        for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do  # slurmd, slurmctld, munged (ours)
            kill "${PIDS[i]}" 2>/dev/null || true
            wait "${PIDS[i]}" 2>/dev/null || true
        done
        say "stopped daemons ${PIDS[*]}"
    fi
    [ -z "${CREATED_RUN_DIR:-}" ] || rm -rf /run/slurm
    [ -z "${CREATED_MUNGE_DIR:-}" ] || rm -rf /run/munge
    if [ "$status" -ne 0 ]; then
        say "FAILED; logs in $STATE"
        tail -n 20 "$STATE"/*.log 2>/dev/null || true
    elif [ -z "${KEEP:-}" ]; then
        rm -rf "$STATE"
    fi
    exit "$status"
}
trap stop EXIT

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
        || ! command -v munged >/dev/null; then
    say "installing slurm-wlm and munge"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi

NODE=$(hostname -s)
CPUS=$(nproc)
MEM_MB=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 ))

# munge at its standard socket (slurmd looks there before it has a
# configuration): a running munged is used, else one is started with its own key.
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    [ -e /run/munge ] || CREATED_MUNGE_DIR=1
    mkdir -p -m 755 /run/munge
    mkdir -m 700 "$STATE/munge"
    dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$STATE/munge/munge.key"
    munged --foreground --force --key-file="$STATE/munge/munge.key" \
        --socket=/run/munge/munge.socket.2 --pid-file="$STATE/munge/munged.pid" \
        --seed-file="$STATE/munge/munged.seed" --log-file="$STATE/munged.log" &
    PIDS+=($!)
    for _ in $(seq 30); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.5; done
fi

mkdir -p "$STATE/ctld" "$STATE/spool"
cat > "$STATE/slurm.conf" <<EOF
ClusterName=scalestudy
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
GresTypes=gpu
ReturnToService=2
# squeue reports a finished job for 10 minutes: the executor's status command
MinJobAge=600
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$STATE/jobcomp.log
MpiDefault=none
SlurmctldParameters=enable_configless
SlurmdParameters=config_overrides
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB Gres=gpu:1 State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
cat > "$STATE/gres.conf" <<EOF
AutoDetect=off
NodeName=$NODE Name=gpu File=/dev/null
EOF
export SLURM_CONF=$STATE/slurm.conf

slurmctld -D -i -f "$SLURM_CONF" &
PIDS+=($!)
# Configless: slurmd fetches the configuration from slurmctld and caches it in
# /run/slurm/conf, where commands inside a job find it (the executor's job
# step drops SLURM_CONF from their environment).
[ -e /run/slurm ] || CREATED_RUN_DIR=1
slurmd -D --conf-server "127.0.0.1:16817" -N "$NODE" &
PIDS+=($!)
say "munged, slurmctld, slurmd started: PIDs ${PIDS[*]} (state in $STATE)"

for _ in $(seq 60); do
    state=$(sinfo -h -n "$NODE" -o %T 2>/dev/null || true)
    [ "$state" = idle ] && break
    sleep 1
done
[ "$state" = idle ] || { say "node $NODE is '$state', not idle"; exit 1; }
say "node $NODE idle: $CPUS CPUs, $MEM_MB MB, gpu:1"

# A GPU request is accepted and granted (the fake gres).
gpu_job=$(sbatch --parsable --gpus=1 --output=/dev/null --wrap true)
for _ in $(seq 60); do
    squeue -h -j "$gpu_job" --states=all -o %T | grep -q COMPLETED && break
    sleep 1
done
squeue -h -j "$gpu_job" --states=all -o %T | grep -q COMPLETED \
    || { say "the GPU job $gpu_job did not complete"; exit 1; }
say "GPU request: job $gpu_job completed"

rm -rf "results/$NAME"
export SCALESTUDY_SLURM_PARTITION=debug    # the partition from the environment
start=$(date +%s)
snakemake --profile profiles/slurm --configfile "$STUDY" --config "study=$NAME" \
    --slurm-status-command squeue --slurm-init-seconds-before-status-checks 5 \
    --latency-wait 10 --retries 0
say "study finished in $(( $(date +%s) - start )) s"

python tools/slurm/check_study.py "$NAME" "$STUDY" "$STATE/jobcomp.log"

# A plugin's study (docs/extending.md: examples/hyena, installed by the Makefile's
# slurm-test): every SLURM job's own parse and command import the plugin.
EXAMPLE=examples/hyena/study.yaml,examples/hyena/smoke.yaml
rm -rf results/slurm_hyena
snakemake --profile profiles/slurm --configfile ${EXAMPLE//,/ } --config study=slurm_hyena \
    --slurm-status-command squeue --slurm-init-seconds-before-status-checks 5 \
    --latency-wait 10 --retries 0
python tools/slurm/check_study.py slurm_hyena "$EXAMPLE" "$STATE/jobcomp.log"

# Preemption: SLURM delivers USR1 to a running training step (scancel --signal,
# the delivery path of the profile's --signal=USR1@120); the run saves last.ckpt
# at the end of its step and exits; submitted again, it resumes there.
RUN=results/$NAME/usr1-run
rm -rf "$RUN"
python tools/slurm/usr1.py spec "$NAME" > "$STATE/usr1-spec.json"
cat > "$STATE/usr1.sh" <<JOB
#!/bin/bash
srun scalestudy train --spec "\$(cat $STATE/usr1-spec.json)" \\
    --data-dir results/$NAME/data/listops --run-dir $RUN
JOB
wait_job() {  # until job $1 leaves the queue; prints its final state
    local state=""
    for _ in $(seq 600); do
        state=$(squeue -h -j "$1" --states=all -o %T 2>/dev/null || true)
        case "$state" in PENDING|RUNNING|CONFIGURING|COMPLETING|"") sleep 1 ;; *) break ;; esac
    done
    echo "$state"
}
job=$(sbatch --parsable --output="$STATE/usr1-first.log" "$STATE/usr1.sh")
for _ in $(seq 300); do [ -e "$RUN/last.ckpt" ] && break; sleep 1; done
[ -e "$RUN/last.ckpt" ] || { say "the USR1 run wrote no checkpoint"; exit 1; }
sleep 3
scancel --signal=USR1 "$job"
say "USR1 sent to job $job: $(wait_job "$job")"
stopped=$(python tools/slurm/usr1.py step "$RUN")
[ ! -e "$RUN/record.parquet" ] || { say "the stopped run wrote its record"; exit 1; }
job=$(sbatch --parsable --output="$STATE/usr1-second.log" "$STATE/usr1.sh")
say "resubmitted as job $job: $(wait_job "$job")"
python tools/slurm/usr1.py check "$RUN" "$STATE/usr1-first.log" "$STATE/usr1-second.log" \
    "$stopped"
say "passed"
