#!/usr/bin/env bash
# A real three-node Slurm cluster on this machine, for the launcher's Slurm
# test (docs/launcher.md, "Slurm"): Debian's munge, slurmctld and one slurmd
# per node, nodes n1-n3 on 127.0.0.2-4, every file under one state
# directory (nothing in /etc, no systemd, no cgroups).
#
#   scripts/slurm/cluster.sh start DIR   # prints the SLURM_CONF to export
#   scripts/slurm/cluster.sh stop DIR
#
# `start` fails (non-zero, with the daemons' logs on stderr) when the
# cluster does not answer `srun hostname` on every node within 20 s.
# The daemons listen on 0.0.0.0 (Slurm has no setting for that); every
# address the cluster uses is on 127.0.0.0/8.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1
dir=$2
nodes=(n1 n2 n3)
addrs=(127.0.0.2 127.0.0.3 127.0.0.4)

# The pids of this cluster's processes: the daemons (pid files) and the
# step daemons (slurmstepd) that run with this cluster's SLURM_CONF.
cluster_pids() {
    local f pid
    for f in "$dir"/slurmd-*.pid "$dir"/slurmctld.pid "$dir"/munged.pid; do
        [ -f "$f" ] || continue
        pid=$(cat "$f" 2>/dev/null || true)
        [ -n "$pid" ] && echo "$pid"
    done
    for f in /proc/[0-9]*/comm; do
        [ "$(cat "$f" 2>/dev/null)" = slurmstepd ] || continue
        pid=${f#/proc/}
        pid=${pid%/comm}
        if { tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | grep -qxF "SLURM_CONF=$dir/slurm.conf"; then
            echo "$pid"
        fi
    done
}

alive() {
    local st
    st=$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null || true)
    [ -n "$st" ] && [ "$st" != Z ]
}

stop() {
    [ -d "$dir" ] || return 0
    # Jobs first, so that no step is left behind; bounded.
    if [ -f "$dir/slurm.conf" ]; then
        SLURM_CONF="$dir/slurm.conf" timeout 5 scancel --full --quiet --user=root 2>/dev/null || true
    fi
    # The pids are read once: slurmd removes its pid file before it exits.
    local pids pid
    pids=$(cluster_pids | sort -u | grep -vx "$$" || true)
    for pid in $pids; do kill "$pid" 2>/dev/null || true; done
    for _ in $(seq 50); do
        local left=0
        for pid in $pids; do alive "$pid" && left=1; done
        [ $left -eq 0 ] && break
        sleep 0.1
    done
    for pid in $pids; do alive "$pid" && kill -KILL "$pid" 2>/dev/null || true; done
    rm -f "$dir"/*.pid
}

logs() {
    for f in "$dir"/*.log; do
        [ -f "$f" ] || continue
        echo "---- $f" >&2
        tail -n 30 "$f" >&2
    done
}

free_ports() {
    # N ports that are free on every address of the cluster right now.
    python3 - "$1" <<'PY'
import socket, sys
socks, ports = [], []
while len(ports) < int(sys.argv[1]):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
    ports.append(s.getsockname()[1])
print(" ".join(map(str, ports)))
PY
}

start() {
    for bin in munged mungekey slurmctld slurmd srun python3; do
        command -v "$bin" >/dev/null 2>&1 || {
            echo "$0: $bin is not installed (apt-get install munge slurmctld slurmd slurm-client)" >&2
            exit 1
        }
    done
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    chmod 0755 "$dir"
    mkdir -p "$dir/ctld" "$dir/spool"
    # munge: a fresh key for this cluster, its own socket.
    rm -f "$dir/munge.key"
    mungekey --create --keyfile="$dir/munge.key" >/dev/null
    chmod 0400 "$dir/munge.key"
    munged --force --socket="$dir/munge.sock" --key-file="$dir/munge.key" \
        --log-file="$dir/munged.log" --pid-file="$dir/munged.pid" \
        --seed-file="$dir/munged.seed"
    read -r ctld_port p1 p2 p3 < <(free_ports 4)
    local ports=("$p1" "$p2" "$p3")
    local host
    host=$(hostname -s)
    {
        echo "ClusterName=sperli"
        echo "SlurmctldHost=$host(127.0.0.1)"
        echo "SlurmctldPort=$ctld_port"
        echo "SlurmUser=root"
        echo "SlurmdUser=root"
        echo "AuthType=auth/munge"
        echo "CredType=cred/munge"
        echo "AuthInfo=socket=$dir/munge.sock"
        echo "StateSaveLocation=$dir/ctld"
        echo "SlurmdSpoolDir=$dir/spool/%n"
        echo "SlurmctldPidFile=$dir/slurmctld.pid"
        echo "SlurmdPidFile=$dir/slurmd-%n.pid"
        echo "SlurmctldLogFile=$dir/slurmctld.log"
        echo "SlurmdLogFile=$dir/slurmd-%n.log"
        echo "ProctrackType=proctrack/pgid"
        echo "TaskPlugin=task/none"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_CPU"
        echo "AccountingStorageType=accounting_storage/none"
        echo "JobCompType=jobcomp/none"
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "SlurmdParameters=config_overrides"
        echo "MpiDefault=none"
        echo "ReturnToService=2"
        echo "SlurmctldTimeout=10"
        echo "SlurmdTimeout=10"
        echo "InactiveLimit=0"
        echo "KillWait=2"
        echo "MinJobAge=10"
        echo "SchedulerType=sched/builtin"
        for i in 0 1 2; do
            echo "NodeName=${nodes[$i]} NodeHostname=$host NodeAddr=${addrs[$i]} Port=${ports[$i]} CPUs=4 State=UNKNOWN"
        done
        echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
    } >"$dir/slurm.conf"
    export SLURM_CONF="$dir/slurm.conf"
    slurmctld -f "$SLURM_CONF"
    for n in "${nodes[@]}"; do
        mkdir -p "$dir/spool/$n"
        slurmd -f "$SLURM_CONF" -N "$n"
    done
    # Ready when every node runs a step.
    local ok=0
    for _ in $(seq 200); do
        if out=$(timeout 5 srun -N3 -n3 --immediate=5 printenv SLURMD_NODENAME </dev/null 2>/dev/null) &&
            [ "$(echo "$out" | sort | tr '\n' ' ')" = "n1 n2 n3 " ]; then
            ok=1
            break
        fi
        sleep 0.1
    done
    if [ $ok -ne 1 ]; then
        echo "$0: the Slurm cluster in $dir did not come up (srun on n1-n3 failed); logs:" >&2
        logs
        stop
        exit 1
    fi
    echo "$SLURM_CONF"
}

case $cmd in
start) start ;;
stop) stop ;;
*) usage ;;
esac
