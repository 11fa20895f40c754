#!/usr/bin/env bash
# A one-node Slurm cluster on localhost, for tests and demos of `neobench study run --launcher slurm`.
#
#   scripts/slurm-local.sh start [DIR]   start munged, slurmctld and slurmd; print the SLURM_CONF line
#   scripts/slurm-local.sh stop [DIR]    stop the daemons this script started in DIR, by their pid files
#   scripts/slurm-local.sh install       install Slurm and MUNGE from the Debian packages if missing
#
# Everything lives in DIR (default: $NEOBENCH_SLURM_DIR, else /tmp/neobench-slurm): slurm.conf, its
# own MUNGE key and socket, state, spool, logs and pid files. Nothing under /etc is changed and the
# system's own munged (if any) is left alone. Daemons listen on 127.0.0.1 only, on ports chosen free
# at start. Commands (sbatch, squeue, scancel) find this cluster through SLURM_CONF=DIR/slurm.conf.
set -euo pipefail

DIR="${2:-${NEOBENCH_SLURM_DIR:-/tmp/neobench-slurm}}"

die() { echo "slurm-local: $*" >&2; exit 1; }

install_packages() {
    local missing=()
    command -v slurmctld >/dev/null || missing+=(slurm-wlm)
    command -v munged >/dev/null || missing+=(munge)
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$(id -u)" -eq 0 ] || die "Slurm is not installed and installing it needs root: run
  sudo apt-get install -y ${missing[*]}"
    command -v apt-get >/dev/null || die "Slurm is not installed and this system has no apt-get:
  install slurm-wlm and munge with its package manager."
    echo "slurm-local: installing ${missing[*]} (apt-get)" >&2
    export DEBIAN_FRONTEND=noninteractive
    # A fresh machine may have no package lists yet: update once, only when the install fails.
    apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; } ||
        die "apt-get could not install ${missing[*]}; see: apt-get install ${missing[*]}"
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# A process that still runs: not gone, and not a zombie (it has exited; its parent reaps it).
running() {
    local stat
    stat="$( { cat "/proc/$1/stat"; } 2>/dev/null )" || return 1
    [ -n "$stat" ] && [ "$(cut -d' ' -f1 <<<"${stat##*) }")" != Z ]
}

write_conf() {
    local host cpus mem
    host="$(hostname -s)"
    cpus="$(nproc)"
    mem="$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)"
    cat >"$DIR/slurm.conf" <<EOF
# Written by scripts/slurm-local.sh: a one-node cluster on localhost.
ClusterName=neobench-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.socket,cred_expire=10
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
# Pending jobs whose begin time has come (a requeued job waits cred_expire) are started by the
# next backfill pass: every 2 s here instead of Slurm's 30, so tests do not sit idle.
SchedulerParameters=bf_interval=2,sched_interval=5
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=300
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

start() {
    install_packages
    if alive "$DIR/run/slurmctld.pid" || alive "$DIR/run/slurmd.pid" || alive "$DIR/run/munged.pid"; then
        die "a cluster is already running from $DIR; stop it first: $0 stop $DIR"
    fi
    rm -rf "$DIR"
    mkdir -p "$DIR"/{munge,state,spool,log,run}
    chmod 700 "$DIR/munge"
    # MUNGE refuses a key readable by others; its own key, not the system's /etc/munge/munge.key.
    dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$DIR/munge/munge.key"
    munged --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
        --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" \
        --seed-file="$DIR/munge/munged.seed" || die "munged did not start; see $DIR/log/munged.log"
    write_conf
    export SLURM_CONF="$DIR/slurm.conf"
    slurmctld -f "$SLURM_CONF" || die "slurmctld did not start; see $DIR/log/slurmctld.log"
    slurmd -f "$SLURM_CONF" || die "slurmd did not start; see $DIR/log/slurmd.log"
    # Within seconds on an idle machine; the deadline only turns a hang into an error.
    for _ in $(seq 1 240); do
        if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
            echo "export SLURM_CONF=$SLURM_CONF"
            return 0
        fi
        sleep 0.5
    done
    stop
    die "the node did not become idle within 120 s; logs in $DIR/log"
}

# Job steps and job tasks of this cluster still alive after slurmd is gone (a killed slurmd
# leaves its slurmstepd processes and their tasks behind, the tasks soon re-parented to init),
# and slurmctld's helper slurmscriptd should it outlive slurmctld: found by
# SLURM_CONF=<this cluster's> in their environment, with SLURM_JOB_ID for the tasks.
ours() {
    local pid env comm
    for pid in $(ls /proc | grep -E '^[0-9]+$'); do
        [ "$pid" = "$$" ] && continue
        env="$( { tr '\0' '\n' < "/proc/$pid/environ"; } 2>/dev/null )" || continue
        grep -qx "SLURM_CONF=$DIR/slurm.conf" <<<"$env" || continue
        comm="$( { cat "/proc/$pid/comm"; } 2>/dev/null )"
        if grep -q '^SLURM_JOB_ID=' <<<"$env" || [ "$comm" = slurmstepd ] ||
            [ "$comm" = slurmscriptd ]; then
            echo "$pid"
        fi
    done
}

stop_steps() {
    local pids
    pids="$(ours)"
    [ -z "$pids" ] && return 0
    kill -TERM $pids 2>/dev/null || true
    sleep 1  # their time to end on SIGTERM
    pids="$(ours)"
    [ -z "$pids" ] && return 0
    kill -KILL $pids 2>/dev/null || true
    # SIGKILL is delivered, not awaited: return once they have ended (at most 30 s).
    for _ in $(seq 1 60); do
        [ -z "$(ours)" ] && return 0
        sleep 0.5
    done
}

stop() {
    local name pid
    for name in slurmd slurmctld munged; do
        [ -f "$DIR/run/$name.pid" ] || continue
        pid="$(cat "$DIR/run/$name.pid")"
        if running "$pid"; then
            kill "$pid"
            for _ in $(seq 1 50); do running "$pid" || break; sleep 0.1; done
            if running "$pid"; then
                kill -9 "$pid"
                for _ in $(seq 1 100); do running "$pid" || break; sleep 0.1; done
            fi
        fi
        rm -f "$DIR/run/$name.pid"
    done
    stop_steps
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    install) install_packages ;;
    *) die "usage: $0 start|stop|install [DIR]" ;;
esac
