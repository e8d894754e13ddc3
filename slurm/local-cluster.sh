#!/usr/bin/env bash
# A real single-node SLURM on this machine (Debian's slurm-wlm and munge), for development and CI.
#
#   slurm/local-cluster.sh start    write the config, start munged, slurmctld and slurmd; wait until the node is idle
#   slurm/local-cluster.sh stop     stop only the daemons this script started (by their pid files)
#   slurm/local-cluster.sh status   the daemons' state and sinfo
#
# Runs as root.  State, logs and pid files live in $ARMILLARY_SLURM_DIR (default /var/tmp/armillary-slurm);
# the config is /etc/slurm/slurm.conf, written only if absent or written by this script before.
set -euo pipefail

DIR=${ARMILLARY_SLURM_DIR:-/var/tmp/armillary-slurm}
CONF=/etc/slurm/slurm.conf
MARKER="# written by armillary slurm/local-cluster.sh"

die() { echo "local-cluster: $*" >&2; exit 1; }

need_tools() {
    for tool in munged slurmctld slurmd sinfo; do
        command -v "$tool" >/dev/null || die "$tool not found; install with: apt-get install -y slurm-wlm munge"
    done
    [ "$(id -u)" = 0 ] || die "must run as root (SlurmUser=root)"
}

write_config() {
    if [ -e "$CONF" ] && ! grep -qF "$MARKER" "$CONF"; then
        die "$CONF exists and was not written by this script; refusing to replace it"
    fi
    mkdir -p "$DIR/state" "$DIR/spool" /etc/slurm
    local host node
    host=$(hostname -s)
    # slurmd -C reports this machine's CPUs, sockets, cores, threads and memory as a NodeName line.
    node=$(slurmd -C | head -n 1)
    cat > "$CONF" <<CONFIG
$MARKER
ClusterName=armillary
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# A one-node test cluster: a requeued job may start again after 10 s, not the 120 s default credential
# lifetime (which also sets that wait), and the scheduler looks at pending jobs every 2 s, not 60 / 30.
AuthInfo=cred_expire=10
SchedulerParameters=sched_interval=2,bf_interval=2
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
$node State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONFIG
}

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start() {
    need_tools
    write_config
    if [ ! -s /etc/munge/munge.key ]; then
        mkdir -p /etc/munge
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
        chown munge:munge /etc/munge/munge.key 2>/dev/null || true
        chmod 400 /etc/munge/munge.key
    fi
    mkdir -p /run/munge && chown munge:munge /run/munge 2>/dev/null || true
    # A munged that already answers (the system's own) is used as is, and left alone by stop.
    if ! running "$DIR/munged.pid" && ! (munge -n | unmunge) >/dev/null 2>&1; then
        runuser -u munge -- munged --pid-file="$DIR/munged.pid.tmp" 2>/dev/null \
            || munged --force --pid-file="$DIR/munged.pid.tmp"
        sleep 0.5
        pgrep -n -x munged > "$DIR/munged.pid"
    fi
    running "$DIR/slurmctld.pid" || slurmctld
    running "$DIR/slurmd.pid" || slurmd
    for _ in $(seq 60); do
        state=$(sinfo -h -o %T 2>/dev/null | head -n 1 || true)
        if [ "$state" = idle ] || [ "$state" = mixed ] || [ "$state" = allocated ]; then
            echo "local-cluster: up, node $state ($CONF, logs in $DIR)"
            return 0
        fi
        sleep 1
    done
    die "node not idle after 60 s (state: ${state:-none}); see $DIR/slurmctld.log and $DIR/slurmd.log"
}

stop() {
    for daemon in slurmd slurmctld munged; do
        if running "$DIR/$daemon.pid"; then
            kill "$(cat "$DIR/$daemon.pid")"
            echo "local-cluster: stopped $daemon"
        fi
        rm -f "$DIR/$daemon.pid" "$DIR/$daemon.pid.tmp"
    done
}

status() {
    for daemon in munged slurmctld slurmd; do
        if running "$DIR/$daemon.pid"; then echo "$daemon: running (pid $(cat "$DIR/$daemon.pid"))"
        else echo "$daemon: not running"; fi
    done
    sinfo 2>/dev/null || true
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
