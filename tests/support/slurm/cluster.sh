#!/usr/bin/env bash
# A one-node SLURM cluster on 127.0.0.1, for testing the workflow's SLURM profile for real.
#
#   tests/support/slurm/cluster.sh start DIR    write DIR/slurm.conf, start munged, slurmctld and slurmd,
#                                       wait until the node takes jobs; prints the variables a
#                                       client needs (also in DIR/env.sh: `source DIR/env.sh`)
#   tests/support/slurm/cluster.sh stop DIR     stop the three daemons started for DIR
#
# Everything (configuration, keys, sockets, state, logs) lives in DIR; nothing under /etc, /run or
# /var is touched, so the system's own munge/slurm (if any) keep running. No cgroups are needed:
# proctrack/linuxproc and task/none. The ports are free ones picked at start. Needs root (slurmd
# starts job steps as the submitting user) and Debian's `slurm-wlm` and `munge` packages
# (`apt-get install slurm-wlm munge`). Exit status 3: this machine cannot run the daemons (the
# message says why); any other non-zero status is a failure to start them.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
action=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd)

pid_of() { [ -s "$dir/$1.pid" ] && cat "$dir/$1.pid" || true; }

stop_daemon() {  # stop_daemon NAME: SIGTERM the daemon whose pid file is DIR/NAME.pid, then wait
    local pid
    pid=$(pid_of "$1")
    [ -n "$pid" ] || return 0
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/$1.pid"
}

if [ "$action" = stop ]; then
    # Job steps still running (a failed test) die with their slurmd: cancel them first.
    if [ -f "$dir/env.sh" ]; then
        # shellcheck disable=SC1091
        (source "$dir/env.sh" && scancel --full --quiet --user "$(id -un)" 2>/dev/null) || true
    fi
    stop_daemon slurmd
    stop_daemon slurmctld
    stop_daemon munged
    exit 0
fi
[ "$action" = start ] || usage

cannot() { echo "cannot run a SLURM cluster here: $*" >&2; exit 3; }
[ "$(id -u)" -eq 0 ] || cannot "slurmd must run as root (this is uid $(id -u))"
for tool in munged mungekey slurmctld slurmd sbatch squeue sinfo scontrol; do
    command -v "$tool" >/dev/null \
        || cannot "'$tool' is not installed (apt-get install slurm-wlm munge)"
done

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

node=$(hostname -s)
cpus=$(nproc)
# The node offers what the machine has, less 512 MB for the daemons and the test itself.
memory_mb=$(( $(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo) - 512 ))
ctld_port=$(free_port)
slurmd_port=$(free_port)
mkdir -p "$dir/state" "$dir/spool" "$dir/log"
chmod 700 "$dir"

# munge: a fresh key and a private socket; the socket is named in slurm.conf (AuthInfo) so that
# every client and daemon of this cluster uses it.
rm -f "$dir/munge.key"
mungekey --create --keyfile="$dir/munge.key" --bits=1024
chmod 400 "$dir/munge.key"
munged --force --socket="$dir/munge.socket" --key-file="$dir/munge.key" \
    --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munged.seed"

cat > "$dir/slurm.conf" <<EOF
# One-node test cluster written by tests/support/slurm/cluster.sh
ClusterName=testcluster
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/slurmd-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
# No cgroups: process tracking through /proc, no task containment.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# Every finished job gets a line here: the test's record that its jobs ran through SLURM.
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
# Finished jobs stay visible to squeue/sacct for 10 minutes (the executor plugin polls them).
MinJobAge=600
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
ReturnToService=2
# The node's declared CPUs and memory are taken as given (no hardware check).
SlurmdParameters=config_overrides
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory_mb State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF

# Clients find this cluster through SLURM_CONF. The executor plugin's job step
# (snakemake-executor-plugin-slurm-jobstep 0.6.1) removes every SLURM_* variable but the job's
# identity before it calls `srun` inside a job, SLURM_CONF included: a real cluster keeps its
# configuration at the default path (/etc/slurm/slurm.conf) or serves it "configless", so it does
# not notice. Rather than write to /etc, the clients on PATH are wrappers that set SLURM_CONF.
mkdir -p "$dir/bin"
system_path=$(printf '%s' "$PATH" | tr ':' '\n' | grep -vxF "$dir/bin" | paste -sd: -)
for tool in srun sbatch squeue sacct scancel sinfo scontrol; do
    real=$(PATH=$system_path command -v "$tool" || true)
    [ -n "$real" ] || continue
    printf '#!/bin/sh\nSLURM_CONF=%s exec %s "$@"\n' "$dir/slurm.conf" "$real" > "$dir/bin/$tool"
    chmod +x "$dir/bin/$tool"
done
cat > "$dir/env.sh" <<EOF
export SLURM_CONF=$dir/slurm.conf
export PATH=$dir/bin:\$PATH
EOF
export SLURM_CONF="$dir/slurm.conf"

fail() {
    echo "SLURM test cluster failed to start: $*" >&2
    for f in "$dir"/log/*.log; do echo "--- $f" >&2; tail -n 20 "$f" >&2 || true; done
    "$0" stop "$dir" || true
    exit 1
}

slurmctld -c -f "$dir/slurm.conf" || fail "slurmctld did not start"
slurmd -c -f "$dir/slurm.conf" || fail "slurmd did not start"

# Wait (at most 60 s) until the node is idle, i.e. takes jobs.
for _ in $(seq 120); do
    state=$(sinfo --noheader --nodes="$node" --format=%T 2>/dev/null || true)
    case "$state" in
        idle*) cat "$dir/env.sh"; exit 0 ;;
        down*|drain*) scontrol update nodename="$node" state=resume 2>/dev/null || true ;;
    esac
    sleep 0.5
done
fail "node $node is not idle after 60 s (state: ${state:-unknown})"
