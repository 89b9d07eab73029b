#!/usr/bin/env bash
# slurm-cluster.sh - a real (Debian) SLURM cluster on this one machine, for tests and demos.
#
# Usage:
#   tools/slurm-cluster.sh start  [--nodes N] [--cpus C] [--mem MB] [--state-dir DIR]
#                                 [--share DIR]... [--etc-hosts]
#   tools/slurm-cluster.sh stop   [--state-dir DIR]
#   tools/slurm-cluster.sh status [--state-dir DIR]
#   tools/slurm-cluster.sh fail-node NODE [--state-dir DIR]   # (multi-node) lose a node
#   tools/slurm-cluster.sh env    [--state-dir DIR]     # print the exports again
#   tools/slurm-cluster.sh install                      # only the Debian packages (root)
#
# start prints (on stdout, progress goes to stderr) the variables clients need, and
# writes them to DIR/env.sh as well:
#   eval "$(tools/slurm-cluster.sh start --nodes 2)"     # or: source DIR/env.sh
#   srun -N2 -n4 --ntasks-per-node=2 hostname
#   srun --mpi=pmix -N2 -n4 --ntasks-per-node=2 ./mpi_hello
#   tools/slurm-cluster.sh stop
#
# Modes:
#   --nodes 1 (default)  one slurmd on this host, NodeName=$(hostname -s), NodeAddr=127.0.0.1.
#   --nodes N (N >= 2)   N emulated nodes simnode1..simnodeN. Each slurmd runs in
#                        - its own network namespace iosw-simnodeK (ip netns), with a veth
#                          "sim0" (address $SUBNET.(10+K)) onto the host bridge iosw-br0
#                          ($SUBNET.1, where slurmctld is reached);
#                        - its own UTS namespace (hostname simnodeK);
#                        - its own mount namespace with a private /tmp (DIR/nodes/NODE/tmp),
#                          a private /dev/shm (tmpfs) and a private /etc/hosts naming all
#                          nodes and the controller. Everything else is shared; paths under
#                          /tmp that must stay shared (DIR itself, --share DIR) are bound
#                          back in at the same path.
#                        Jobs run inside their node's namespaces, so a job's cwd (and its
#                        output files) must be on a shared path, i.e. not under /tmp unless
#                        passed with --share.
#
# Options:
#   --nodes N        number of nodes (default 1)
#   --cpus C         CPUs per node (default: nproc). SlurmdParameters=config_overrides, so
#                    more CPUs than the machine has is allowed (oversubscription).
#   --mem MB         RealMemory per node (default 8000)
#   --slurmd-timeout S  seconds without an answer from a slurmd before slurmctld marks its
#                    node DOWN and ends its jobs with NODE_FAIL (default 600; tests use less)
#   --state-dir DIR  config, logs, pid files, spool (default: $IOSWEEP_SLURM_STATE_DIR or
#                    /var/tmp/iosweep-slurm). Keep it short: unix socket paths live in it.
#   --share DIR      (multi-node) a directory under /tmp that nodes must see (repeatable)
#   --etc-hosts      (multi-node) also add "ADDR simnodeK" lines to the host's /etc/hosts,
#                    between markers that stop removes. Not needed by Slurm or Open MPI
#                    (nodes get their own /etc/hosts); only for host-side name lookups.
#
# Environment: IOSWEEP_SLURM_STATE_DIR (default state dir), IOSWEEP_SLURM_SUBNET (first three
# octets of the private /24, default 10.203.0), IOSWEEP_SLURM_PORT (slurmctld port, default
# 6817; slurmd uses PORT+1), IOSWEEP_SLURM_TIMEOUT (seconds to wait for nodes, default 90).
#
# What runs: a private munged (own key and socket in DIR/munge; an already running system
# munged is neither used nor touched), slurmctld, slurmd(s); all as root, all with pid files
# in DIR/pids. stop kills exactly those (checked against their command line), plus the job
# processes inside the node namespaces, then removes what start created (recorded in
# DIR/created). stop is safe to run twice or after a failed start. There is no slurmdbd:
# sacct does not work; use squeue / scontrol show job (jobs stay listed MinJobAge=300 s
# after they end) and DIR/log/jobcomp.txt (one line per finished job).
#
# fail-node NODE: the node dies as a machine does: every process in its namespaces (slurmd,
# slurmstepd, the job's tasks) gets SIGKILL and its link goes down. slurmctld notices after
# --slurmd-timeout, marks it DOWN and ends its jobs with NODE_FAIL. stop cleans up as usual.
#
# Notes: mpi.conf sets PMIxCollFence=ring (with Slurm 22.05's default fence, Open MPI 4.1
# ranks launched by srun --mpi=pmix across nodes crashed in MPI_Init in ~5% of runs here).
# The first job after start waits ~3 s for the scheduler's first cycle; sbatch --wait polls
# after 2 s, then every 8 s. "mpi/pmix ... Failed to remove /tmp/spmix_appdir_*" in the
# slurmd logs is harmless (the PMIx library removed the directory first).
#
# Requires root. Missing Debian packages (slurm-wlm, slurm-wlm-basic-plugins, munge,
# iproute2, util-linux) are installed with apt-get.
set -euo pipefail

PROG=slurm-cluster
SELF="$(readlink -f "${BASH_SOURCE[0]}")"
SUBNET="${IOSWEEP_SLURM_SUBNET:-10.203.0}"
CTLD_PORT="${IOSWEEP_SLURM_PORT:-6817}"
SLURMD_PORT=$((CTLD_PORT + 1))
WAIT_TIMEOUT="${IOSWEEP_SLURM_TIMEOUT:-90}"
BRIDGE=iosw-br0
NS_PREFIX=iosw-
NODE_IF=sim0
MARK=IOSWEEP_SLURM_CLUSTER # env marker given to every daemon we start
SBIN=/usr/sbin

log() { printf '[%s %(%H:%M:%S)T] %s\n' "$PROG" -1 "$*" >&2; }
die() {
  printf '[%s] ERROR: %s\n' "$PROG" "$*" >&2
  exit 1
}

usage() {
  sed -n '2,/^set -euo/p' "$SELF" | sed '$d; s/^# \{0,1\}//'
}

# ---------------------------------------------------------------- arguments
CMD="${1:-}"
[[ -n "$CMD" ]] || {
  usage >&2
  exit 2
}
shift
NODES=1
CPUS=""
MEM=8000
SLURMD_TIMEOUT=600
STATE_DIR="${IOSWEEP_SLURM_STATE_DIR:-/var/tmp/iosweep-slurm}"
SHARES=()
ETC_HOSTS=0
FAIL_NODE=""
if [[ "$CMD" == fail-node ]]; then
  FAIL_NODE="${1:-}"
  [[ -n "$FAIL_NODE" && "$FAIL_NODE" != -* ]] || die "fail-node needs a node name"
  shift
fi
if [[ "$CMD" != __node-exec ]]; then
  while (($#)); do
    case "$1" in
      --nodes) NODES="${2:?--nodes needs a value}"; shift 2 ;;
      --cpus) CPUS="${2:?--cpus needs a value}"; shift 2 ;;
      --mem) MEM="${2:?--mem needs a value}"; shift 2 ;;
      --slurmd-timeout) SLURMD_TIMEOUT="${2:?--slurmd-timeout needs a value}"; shift 2 ;;
      --state-dir) STATE_DIR="${2:?--state-dir needs a value}"; shift 2 ;;
      --share) SHARES+=("${2:?--share needs a value}"); shift 2 ;;
      --etc-hosts) ETC_HOSTS=1; shift ;;
      -h | --help) usage; exit 0 ;;
      *) die "unknown argument '$1' (see: $0 --help)" ;;
    esac
  done
fi
S="$(readlink -m "$STATE_DIR")"
CONF="$S/slurm.conf"

# ---------------------------------------------------------------- helpers
# names_state PID: the process's command line names the state dir (an argument that is
# DIR, or starts with DIR/ or contains =DIR/), or it carries our environment marker.
names_state() {
  tr '\0' '\n' 2>/dev/null <"/proc/$1/cmdline" |
    awk -v s="$S" '$0 == s || index($0, s "/") == 1 || index($0, "=" s "/") > 0 { f = 1 } END { exit !f }' ||
    tr '\0' '\n' 2>/dev/null <"/proc/$1/environ" | grep -qxF -- "$MARK=$S"
}

# pid_ours PIDFILE: print the pid if it is alive (not a zombie) and names our state dir.
pid_ours() {
  local f="$1" pid
  [[ -s "$f" ]] || return 1
  pid="$(<"$f")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  alive "$pid" && names_state "$pid" || return 1
  echo "$pid"
}

# stepd_pids: slurmstepd processes of this cluster (they keep our slurmd log open) and
# all their descendants (the job's tasks).
stepd_pids() {
  local pid fd found=()
  for pid in $(pgrep -x slurmstepd || true); do
    for fd in /proc/"$pid"/fd/*; do
      if [[ "$(readlink "$fd" 2>/dev/null)" == "$S/"* ]]; then
        found+=("$pid")
        break
      fi
    done
  done
  ((${#found[@]})) || return 0
  ps -e -o pid=,ppid= | awk -v roots="${found[*]}" '
    BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) keep[r[i]] = 1 }
    { parent[$1] = $2 }
    END { do { changed = 0; for (p in parent) if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; changed = 1 } } while (changed)
          for (p in keep) print p }'
}

alive() { # alive PID: running and not a zombie
  local st
  st="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" || return 1
  [[ -n "$st" && "$st" != Z && "$st" != X ]]
}

# kill_wait SECONDS PID...: SIGTERM, wait, SIGKILL what is left.
kill_wait() {
  local secs="$1" p left i
  shift
  (($#)) || return 0
  kill -TERM "$@" 2>/dev/null || true
  for ((i = 0; i < secs * 10; i++)); do
    left=0
    for p in "$@"; do alive "$p" && left=1; done
    ((left)) || return 0
    sleep 0.1
  done
  for p in "$@"; do
    if alive "$p"; then
      log "pid $p did not stop on SIGTERM, sending SIGKILL"
      kill -KILL "$p" 2>/dev/null || true
    fi
  done
}

tail_log() { # tail_log FILE...: show the end of daemon logs on stderr
  local f
  for f in "$@"; do
    [[ -s "$f" ]] || continue
    printf -- '----- last lines of %s -----\n' "$f" >&2
    tail -n 25 "$f" >&2
  done
}

node_names() { # read from the state dir
  [[ -s "$S/nodes.list" ]] && cat "$S/nodes.list"
}

need_root() {
  [[ $(id -u) -eq 0 ]] || die "must run as root (starts daemons, network namespaces); got uid $(id -u)"
}

ensure_packages() {
  local missing=() want
  for want in slurm-wlm slurmctld slurmd slurm-client slurm-wlm-basic-plugins munge libpmix2 iproute2 util-linux; do
    dpkg -s "$want" >/dev/null 2>&1 || missing+=("$want")
  done
  command -v unshare >/dev/null || missing+=(util-linux)
  ((${#missing[@]})) || return 0
  command -v apt-get >/dev/null || die "missing Debian packages (${missing[*]}) and no apt-get to install them"
  log "installing Debian packages: ${missing[*]}"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >"/tmp/$PROG-apt.$$.log" 2>&1; then
    log "apt-get install failed; running apt-get update and retrying"
    DEBIAN_FRONTEND=noninteractive apt-get update >>"/tmp/$PROG-apt.$$.log" 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >>"/tmp/$PROG-apt.$$.log" 2>&1 || {
      tail -n 20 "/tmp/$PROG-apt.$$.log" >&2
      die "apt-get install ${missing[*]} failed (log: /tmp/$PROG-apt.$$.log)"
    }
  fi
  rm -f "/tmp/$PROG-apt.$$.log"
}

record() { echo "$*" >>"$S/created"; } # resources to remove on stop

# launch PIDFILE LOG CMD...: start CMD detached (own session, stdio to LOG); CMD's pid is
# written to PIDFILE by the process itself just before it execs CMD.
launch() {
  local pidfile="$1" out="$2"
  shift 2
  # shellcheck disable=SC2016 # $$ and $@ belong to the inner shell
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$pidfile" "$@" </dev/null >>"$out" 2>&1 &
}

# wait_pidfile FILE NAME: the launched process has written its pid
wait_pidfile() {
  local i
  for ((i = 0; i < 100; i++)); do
    [[ -s "$1" ]] && return 0
    sleep 0.05
  done
  die "$2 did not start (no pid in $1)"
}

# ---------------------------------------------------------------- start
write_conf() {
  local ctl_host ctl_addr n k
  ctl_host="$(hostname -s)"
  if ((NODES == 1)); then ctl_addr=127.0.0.1; else ctl_addr="$SUBNET.1"; fi
  cat >"$CONF" <<EOF
# Written by tools/slurm-cluster.sh (iosweep) - regenerated on every start.
ClusterName=iosweep
SlurmctldHost=${ctl_host}(${ctl_addr})
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$S/munge/munge.socket
StateSaveLocation=$S/ctld
SlurmdSpoolDir=$S/spool/%n
SlurmctldPidFile=$S/pids/slurmctld.slurm.pid
SlurmdPidFile=$S/pids/slurmd-%n.slurm.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd-%n.log
SlurmctldDebug=info
MailProg=/bin/true
SlurmdDebug=info
PlugStackConfig=$S/plugstack.conf
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$S/log/jobcomp.txt
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
SlurmdParameters=config_overrides
ReturnToService=2
SlurmdTimeout=$SLURMD_TIMEOUT
SlurmctldTimeout=120
MessageTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=300
TmpFS=/tmp
EOF
  if ((NODES == 1)); then
    n="$(hostname -s)"
    echo "NodeName=$n NodeHostname=$n NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM State=UNKNOWN" >>"$CONF"
  else
    for ((k = 1; k <= NODES; k++)); do
      echo "NodeName=simnode$k NodeHostname=simnode$k NodeAddr=$SUBNET.$((10 + k)) CPUs=$CPUS RealMemory=$MEM State=UNKNOWN" >>"$CONF"
    done
  fi
  echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$CONF"
  : >"$S/plugstack.conf"
  # mpi/pmix: the default "mixed" (tree-based) fence of Slurm 22.05 lets Open MPI 4.1 ranks
  # crash in MPI_Init now and then (SIGSEGV in mca_btl_tcp, ~5% of 3x12-rank runs here);
  # the ring algorithm did not fail in any run.
  echo "PMIxCollFence=ring" >"$S/mpi.conf"
  # slurmd reads cgroup.conf even with proctrack/linuxproc; pin the v1 plugin so that it
  # never probes (this sandbox mounts a v1 hierarchy with a tmpfs /sys/fs/cgroup).
  printf 'CgroupPlugin=cgroup/v1\nCgroupAutomount=no\nConstrainCores=no\nConstrainRAMSpace=no\n' >"$S/cgroup.conf"
}

write_env() {
  local ifspec
  if ((NODES == 1)); then ifspec=lo; else ifspec="$SUBNET.0/24"; fi
  cat >"$S/env.sh" <<EOF
export SLURM_CONF=$CONF
export OMPI_MCA_pml=ob1
export OMPI_MCA_btl=self,vader,tcp
export OMPI_MCA_btl_tcp_if_include=$ifspec
export OMPI_MCA_oob_tcp_if_include=$ifspec
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
EOF
}

start_munged() {
  mkdir -p "$S/munge"
  chmod 700 "$S/munge"
  [[ -s "$S/munge/munge.key" ]] || mungekey --create --keyfile="$S/munge/munge.key" >/dev/null
  rm -f "$S/munge/munge.socket" "$S/munge/munge.socket.lock"
  # -f: the socket's directories are not world-searchable (fine: all clients are root)
  munged -f --socket="$S/munge/munge.socket" --key-file="$S/munge/munge.key" \
    --pid-file="$S/pids/munged.pid" --log-file="$S/log/munged.log" \
    --seed-file="$S/munge/munged.seed" </dev/null >>"$S/log/munged.out" 2>&1 ||
    {
      tail_log "$S/log/munged.out" "$S/log/munged.log"
      die "munged failed to start"
    }
  munge -n -S "$S/munge/munge.socket" | unmunge -S "$S/munge/munge.socket" >/dev/null ||
    {
      tail_log "$S/log/munged.log"
      die "munged runs but munge/unmunge via $S/munge/munge.socket fails"
    }
  log "munged up (pid $(<"$S/pids/munged.pid"), socket $S/munge/munge.socket)"
}

setup_network() {
  local k ns host_if addr
  ip link add "$BRIDGE" type bridge forward_delay 0 stp_state 0 || die "ip link add $BRIDGE type bridge failed"
  record link "$BRIDGE"
  ip link set "$BRIDGE" alias "iosweep-slurm $S" 2>/dev/null || true
  ip addr add "$SUBNET.1/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for ((k = 1; k <= NODES; k++)); do
    ns="${NS_PREFIX}simnode$k"
    host_if="iosw-v$k"
    addr="$SUBNET.$((10 + k))"
    ip netns add "$ns" || die "ip netns add $ns failed"
    record netns "$ns"
    ip link add "$host_if" type veth peer name "$NODE_IF" netns "$ns" ||
      die "could not create veth $host_if <-> $ns:$NODE_IF"
    record link "$host_if"
    ip link set "$host_if" master "$BRIDGE" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$addr/24" dev "$NODE_IF"
    ip -n "$ns" link set "$NODE_IF" up
  done
  log "network: bridge $BRIDGE $SUBNET.1/24, nodes $SUBNET.11..$SUBNET.$((10 + NODES))"
}

write_node_files() {
  local k n ctl_host
  ctl_host="$(hostname -s)"
  for ((k = 1; k <= NODES; k++)); do
    n="simnode$k"
    mkdir -p "$S/nodes/$n/tmp"
    chmod 1777 "$S/nodes/$n/tmp"
    {
      # the host's entries, without those naming the controller or the nodes
      awk -v c="$ctl_host" '{ keep = 1; for (i = 2; i <= NF; i++) if ($i == c || $i ~ /^simnode[0-9]+$/) keep = 0; if (keep) print }' /etc/hosts
      echo "# iosweep slurm-cluster"
      echo "$SUBNET.1 $ctl_host"
      for ((j = 1; j <= NODES; j++)); do echo "$SUBNET.$((10 + j)) simnode$j"; done
    } >"$S/nodes/$n/hosts"
  done
}

add_etc_hosts() {
  local tmp
  tmp="$(mktemp)"
  {
    grep -vF -- "# iosweep-slurm $S" /etc/hosts || true
    for ((k = 1; k <= NODES; k++)); do echo "$SUBNET.$((10 + k)) simnode$k # iosweep-slurm $S"; done
  } >"$tmp"
  cat "$tmp" >/etc/hosts # in place: /etc/hosts may be a bind mount
  rm -f "$tmp"
  record etc-hosts
}

# Link the config to Slurm's default path (/etc/slurm) when nothing is there: clients that
# do not get SLURM_CONF still find the cluster. The Snakemake SLURM executor's job steps
# drop every SLURM_* variable but the job's identity, so their inner srun needs this.
link_system_conf() {
  local f
  if [[ -e /etc/slurm/slurm.conf || -L /etc/slurm/slurm.conf ]]; then
    log "NOTE: /etc/slurm/slurm.conf exists and is not this cluster's; clients that do not"
    log "      get SLURM_CONF (e.g. job steps of snakemake --executor slurm) will not find it"
    return
  fi
  mkdir -p /etc/slurm
  for f in slurm.conf mpi.conf cgroup.conf; do
    [[ -e "$S/$f" && ! -e "/etc/slurm/$f" && ! -L "/etc/slurm/$f" ]] || continue
    ln -s "$S/$f" "/etc/slurm/$f"
    record sysconf "/etc/slurm/$f"
  done
}

start_slurmctld() {
  local i
  launch "$S/pids/slurmctld.pid" "$S/log/slurmctld.out" env "$MARK=$S" "$SBIN/slurmctld" -D -f "$CONF"
  wait_pidfile "$S/pids/slurmctld.pid" slurmctld
  for ((i = 0; i < WAIT_TIMEOUT * 4; i++)); do
    if ! pid_ours "$S/pids/slurmctld.pid" >/dev/null; then
      tail_log "$S/log/slurmctld.out" "$S/log/slurmctld.log"
      die "slurmctld exited during startup (logs above, config $CONF)"
    fi
    if SLURM_CONF="$CONF" scontrol ping 2>/dev/null | grep -q 'is UP'; then
      log "slurmctld up (pid $(<"$S/pids/slurmctld.pid"))"
      return 0
    fi
    ((i % 20 == 19)) && log "waiting for slurmctld to answer ($((i / 4 + 1)) s)"
    sleep 0.25
  done
  tail_log "$S/log/slurmctld.out" "$S/log/slurmctld.log"
  die "slurmctld did not answer 'scontrol ping' within $WAIT_TIMEOUT s"
}

start_slurmds() {
  local n
  while read -r n; do
    mkdir -p "$S/spool/$n"
    if ((NODES == 1)); then
      launch "$S/pids/slurmd-$n.pid" "$S/log/slurmd-$n.out" env "$MARK=$S" "$SBIN/slurmd" -D -f "$CONF" -N "$n"
    else
      # not "ip netns exec": it remounts /sys, after which slurmd fails to set up cgroups
      setsid nsenter --net="/run/netns/${NS_PREFIX}$n" \
        unshare --uts --mount --propagation private \
        bash "$SELF" __node-exec "$S" "$n" </dev/null >>"$S/log/slurmd-$n.out" 2>&1 &
    fi
  done < <(node_names)
  while read -r n; do
    wait_pidfile "$S/pids/slurmd-$n.pid" "slurmd on $n"
  done < <(node_names)
}

wait_nodes_idle() {
  local i n states bad idle
  for ((i = 0; i < WAIT_TIMEOUT * 2; i++)); do
    while read -r n; do
      if ! pid_ours "$S/pids/slurmd-$n.pid" >/dev/null; then
        tail_log "$S/log/slurmd-$n.out" "$S/log/slurmd-$n.log" "$S/log/slurmctld.log"
        die "slurmd for node $n exited during startup (logs above)"
      fi
    done < <(node_names)
    states="$(SLURM_CONF="$CONF" sinfo -h -N -o '%N %T' 2>/dev/null | sort -u)" || states=""
    idle="$(awk '$2 == "idle"' <<<"$states" | wc -l)"
    if ((idle == NODES)); then
      log "all $NODES node(s) idle after $((i / 2)) s"
      return 0
    fi
    bad="$(awk '$2 ~ /drain|fail|down/' <<<"$states")"
    if [[ -n "$bad" && $i -gt 20 ]]; then
      SLURM_CONF="$CONF" scontrol show node >&2 || true
      tail_log "$S/log/slurmctld.log"
      die "node(s) not usable: $(tr '\n' ' ' <<<"$bad")"
    fi
    ((i % 6 == 5)) && log "waiting for nodes to become idle: $(tr '\n' ' ' <<<"${states:-no answer from sinfo}")"
    sleep 0.5
  done
  tail_log "$S/log/slurmctld.log"
  while read -r n; do tail_log "$S/log/slurmd-$n.log"; done < <(node_names)
  die "nodes not idle within $WAIT_TIMEOUT s: $(tr '\n' ' ' <<<"$states")"
}

preflight() {
  local k p
  [[ "$NODES" =~ ^[1-9][0-9]*$ ]] || die "--nodes must be a positive integer, got '$NODES'"
  ((NODES <= 200)) || die "--nodes at most 200"
  [[ -z "$CPUS" ]] && CPUS="$(nproc)"
  [[ "$CPUS" =~ ^[1-9][0-9]*$ ]] || die "--cpus must be a positive integer, got '$CPUS'"
  [[ "$MEM" =~ ^[1-9][0-9]*$ ]] || die "--mem must be a positive integer (MB), got '$MEM'"
  [[ "$SLURMD_TIMEOUT" =~ ^[1-9][0-9]*$ ]] || die "--slurmd-timeout must be a positive integer (s), got '$SLURMD_TIMEOUT'"
  # unix sockets (munge, slurmd spool, slurmstepd) must fit into 108 bytes
  ((${#S} <= 70)) || die "state dir path too long (${#S} > 70 chars): $S"
  [[ "$S" != *[[:space:]]* ]] || die "state dir path must not contain white space: '$S'"
  for p in "$S"/pids/*.pid; do
    [[ -e "$p" ]] || continue
    if pid_ours "$p" >/dev/null; then
      die "a cluster is already running from $S (pid file $p); run: $0 stop --state-dir $S"
    fi
  done
  [[ ! -s "$S/created" ]] || die "$S/created lists resources of an earlier start; run: $0 stop --state-dir $S"
  for p in "$CTLD_PORT" "$SLURMD_PORT"; do
    if [[ -n "$(ss -Hltn "sport = :$p" 2>/dev/null)" ]]; then
      die "TCP port $p is in use on this host (another slurm?); set IOSWEEP_SLURM_PORT to another base port"
    fi
  done
  if ((NODES > 1)); then
    if ip link show "$BRIDGE" >/dev/null 2>&1; then
      die "bridge $BRIDGE exists already ($(ip -o link show "$BRIDGE" | grep -o 'alias.*' || echo 'no owner noted')); stop that cluster first"
    fi
    for ((k = 1; k <= NODES; k++)); do
      [[ ! -e "/run/netns/${NS_PREFIX}simnode$k" ]] || die "network namespace ${NS_PREFIX}simnode$k exists already; stop that cluster first"
    done
    unshare --net --uts --mount true 2>/dev/null || die "cannot create namespaces here (unshare --net --uts --mount failed)"
    local sh
    for sh in "${SHARES[@]}"; do
      [[ -d "$sh" ]] || die "--share $sh: not a directory"
    done
  fi
}

cmd_start() {
  local t0=$SECONDS n k sh
  need_root
  ensure_packages
  preflight
  log "starting a $NODES-node cluster ($CPUS CPUs, $MEM MB per node) in $S"
  mkdir -p "$S"/{pids,log,ctld,spool,nodes}
  # a fresh cluster every time: no jobs, node state or logs from an earlier run
  rm -rf "${S:?}"/ctld/* "${S:?}"/spool/* "${S:?}"/nodes/* "${S:?}"/pids/* "${S:?}"/log/*
  : >"$S/created"
  if ((NODES == 1)); then
    hostname -s >"$S/nodes.list"
  else
    for ((k = 1; k <= NODES; k++)); do echo "simnode$k"; done >"$S/nodes.list"
  fi
  {
    echo "$S"
    for sh in "${SHARES[@]}"; do readlink -f "$sh"; done
  } | sort -u >"$S/shared.list" # parents before children
  echo "$NODES" >"$S/nodes.count"
  trap 'on_start_exit' EXIT
  write_conf
  write_env
  link_system_conf
  start_munged
  if ((NODES > 1)); then
    setup_network
    write_node_files
    ((ETC_HOSTS)) && add_etc_hosts
  fi
  start_slurmctld
  start_slurmds
  wait_nodes_idle
  trap - EXIT
  log "cluster up in $((SECONDS - t0)) s: $(node_names | tr '\n' ' ')"
  log "the variables below are also in $S/env.sh; stop with: $SELF stop --state-dir $S"
  cat "$S/env.sh"
}

on_start_exit() {
  local rc=$?
  ((rc != 0)) || return 0
  log "start failed (exit $rc); cleaning up what was started (logs are kept in $S/log)"
  cmd_stop || true
  exit "$rc"
}

# ---------------------------------------------------------------- node side
# Runs inside "nsenter --net unshare --uts --mount": becomes the node's slurmd.
node_exec() {
  local node="$2" p fd i
  local -a fds=() paths=()
  echo $$ >"$S/pids/slurmd-$node.pid"
  hostname "$node"
  # keep the shared paths that lie under /tmp reachable after /tmp is replaced
  while read -r p; do
    [[ "$p" == /tmp || "$p" == /tmp/* ]] || continue
    exec {fd}<"$p"
    fds+=("$fd")
    paths+=("$p")
  done <"$S/shared.list"
  mount --bind "$S/nodes/$node/tmp" /tmp
  for i in "${!paths[@]}"; do
    mkdir -p "${paths[$i]}"
    mount --no-canonicalize --bind "/proc/self/fd/${fds[$i]}" "${paths[$i]}"
    fd="${fds[$i]}"
    exec {fd}<&-
  done
  mount -t tmpfs -o mode=1777 tmpfs /dev/shm
  mount --bind "$S/nodes/$node/hosts" /etc/hosts
  export "$MARK=$S"
  exec "$SBIN/slurmd" -D -f "$CONF" -N "$node"
}

# ---------------------------------------------------------------- stop
cmd_stop() {
  local t0=$SECONDS pid n f ns what name pids=() line
  need_root
  if [[ ! -d "$S" ]]; then
    log "no state dir $S: nothing to stop"
    return 0
  fi
  # 1. cancel jobs while slurmctld still answers
  if pid_ours "$S/pids/slurmctld.pid" >/dev/null && [[ -f "$CONF" ]]; then
    local jobs
    jobs="$(SLURM_CONF="$CONF" timeout 10 squeue -h -o %i 2>/dev/null | tr '\n' ' ')" || jobs=""
    if [[ -n "${jobs// /}" ]]; then
      log "cancelling jobs: $jobs"
      # shellcheck disable=SC2086
      SLURM_CONF="$CONF" timeout 10 scancel $jobs 2>/dev/null || true
      for ((i = 0; i < 20; i++)); do
        [[ -z "$(SLURM_CONF="$CONF" timeout 5 squeue -h -t R,CG -o %i 2>/dev/null)" ]] && break
        sleep 0.25
      done
    fi
  fi
  # 2. slurmds, then everything still inside the node namespaces or marked as ours
  for f in "$S"/pids/slurmd-*.pid; do
    [[ -e "$f" ]] || continue
    [[ "$f" == *.slurm.pid ]] && continue
    pid="$(pid_ours "$f")" && pids+=("$pid")
  done
  if ((${#pids[@]})); then
    log "stopping slurmd (pids ${pids[*]})"
    kill_wait 10 "${pids[@]}"
  fi
  pids=()
  if [[ -s "$S/created" ]]; then
    while read -r what name; do
      [[ "$what" == netns && -e "/run/netns/$name" ]] || continue
      while read -r pid; do [[ -n "$pid" ]] && pids+=("$pid"); done < <(ip netns pids "$name" 2>/dev/null)
    done <"$S/created"
  fi
  while read -r pid; do [[ -n "$pid" ]] && pids+=("$pid"); done < <(stepd_pids)
  if ((${#pids[@]})); then
    log "stopping leftover job/step processes (pids ${pids[*]})"
    kill_wait 5 "${pids[@]}"
  fi
  # 3. slurmctld, munged
  for n in slurmctld munged; do
    if pid="$(pid_ours "$S/pids/$n.pid")"; then
      log "stopping $n (pid $pid)"
      kill_wait 10 "$pid"
    fi
  done
  # 4. namespaces, links, /etc/hosts lines: newest first
  if [[ -s "$S/created" ]]; then
    while read -r what name; do
      case "$what" in
        netns)
          if [[ -e "/run/netns/$name" ]]; then
            ip netns del "$name" || log "WARNING: ip netns del $name failed"
          fi
          ;;
        link)
          if ip link show "$name" >/dev/null 2>&1; then
            ip link del "$name" || log "WARNING: ip link del $name failed"
          fi
          ;;
        sysconf)
          # only our own link, still pointing into this state dir
          if [[ -L "$name" && "$(readlink "$name")" == "$S/"* ]]; then
            rm -f "$name"
          fi
          ;;
        etc-hosts)
          if grep -qF -- "# iosweep-slurm $S" /etc/hosts; then
            line="$(mktemp)"
            grep -vF -- "# iosweep-slurm $S" /etc/hosts >"$line" || true
            cat "$line" >/etc/hosts
            rm -f "$line"
          fi
          ;;
      esac
    done < <(tac "$S/created")
    : >"$S/created"
  fi
  rm -f "$S"/pids/*.pid "$S/munge/munge.socket" "$S/munge/munge.socket.lock"
  log "stopped in $((SECONDS - t0)) s (logs kept in $S/log)"
}

# ---------------------------------------------------------------- fail-node
cmd_fail_node() {
  local ns="${NS_PREFIX}$FAIL_NODE" k pids=()
  need_root
  grep -qxF -- "$FAIL_NODE" "$S/nodes.list" 2>/dev/null || die "no node $FAIL_NODE in $S/nodes.list"
  [[ -e "/run/netns/$ns" ]] || die "$FAIL_NODE has no network namespace $ns (a one-node cluster cannot lose its node)"
  while read -r k; do [[ -n "$k" ]] && pids+=("$k"); done < <(ip netns pids "$ns" 2>/dev/null)
  if ((${#pids[@]})); then
    log "$FAIL_NODE: SIGKILL to ${#pids[@]} process(es) (slurmd, steps, tasks): ${pids[*]}"
    kill -KILL "${pids[@]}" 2>/dev/null || true
  fi
  k="${FAIL_NODE#simnode}"
  ip link set "iosw-v$k" down 2>/dev/null || log "WARNING: could not take iosw-v$k down"
  log "$FAIL_NODE is gone; slurmctld marks it DOWN after its SlurmdTimeout ($(awk -F= '$1 == "SlurmdTimeout" {print $2}' "$CONF") s)"
}

# ---------------------------------------------------------------- status
cmd_status() {
  local f n rc=0 pid
  [[ -d "$S" ]] || {
    echo "no cluster state in $S"
    return 3
  }
  echo "state dir: $S"
  for f in "$S"/pids/*.pid; do
    [[ -e "$f" && "$f" != *.slurm.pid ]] || continue
    n="$(basename "$f" .pid)"
    if pid="$(pid_ours "$f")"; then echo "  $n: running (pid $pid)"; else
      echo "  $n: NOT running"
      rc=3
    fi
  done
  [[ -e "$S/pids/slurmctld.pid" ]] || {
    echo "  not running (no pid files)"
    return 3
  }
  if [[ -s "$S/created" ]]; then
    echo "  created: $(tr '\n' ' ' <"$S/created")"
  fi
  if ((rc == 0)); then
    echo "--- sinfo"
    SLURM_CONF="$CONF" sinfo -N -o '%N %T %c %m %P' || rc=3
    echo "--- squeue"
    SLURM_CONF="$CONF" squeue || rc=3
    echo "--- env ($S/env.sh)"
    cat "$S/env.sh"
  fi
  return "$rc"
}

case "$CMD" in
  install)
    need_root
    ensure_packages
    ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  fail-node) cmd_fail_node ;;
  env)
    [[ -s "$S/env.sh" ]] || die "no $S/env.sh (cluster never started there)"
    cat "$S/env.sh"
    ;;
  __node-exec)
    S="$(readlink -m "$1")"
    CONF="$S/slurm.conf"
    node_exec "$@"
    ;;
  -h | --help | help) usage ;;
  *) die "unknown command '$CMD' (install, start, stop, status, env, fail-node)" ;;
esac
