#!/usr/bin/env bats
# The worked Slurm example on a real one-node cluster, started here from
# Debian's slurm-wlm and munge and torn down afterwards: sbatch-search.sh
# runs search-sharded.yaml as a job array of 4 shards and the dependent
# merge job; the per-shard parts joined are the unsharded run's bits, and
# the merge is the unsharded search's top k.  A failed shard fails the
# array and writes no merged output.  Needs root; runs once, in the normal
# build (as the fuzz smoke run).

bats_require_minimum_version 1.5.0

# Skips, saying why, when the cluster cannot be started here; under
# CI=true, where .ci/run installs everything and runs as root, that is a
# failure.
need() {
    if [ "${CI:-}" = true ]; then
        echo "slurm.bats: $1 (CI=true: this test must run)" >&2
        return 1
    fi
    skip "$1"
}

# A free TCP port on this machine.
free_port() {
    /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}

setup_file() {
    export CLUSTER="$BATS_FILE_TMPDIR/cluster"
    export SLURM_CONF="$CLUSTER/slurm.conf"
    mkdir -p "$CLUSTER/state" "$CLUSTER/spool"
    [ "$(id -u)" -eq 0 ] || return 0
    command -v slurmctld > /dev/null && command -v slurmd > /dev/null &&
        command -v munged > /dev/null && command -v sbatch > /dev/null || return 0
    dd if=/dev/urandom of="$CLUSTER/munge.key" bs=1024 count=1 2> /dev/null
    chmod 400 "$CLUSTER/munge.key"
    local host ctld_port d_port
    host=$(hostname)
    ctld_port=$(free_port)
    d_port=$(free_port)
    cat > "$SLURM_CONF" <<EOF
ClusterName=tensorrun-test
SlurmctldHost=$host
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
AuthType=auth/munge
AuthInfo=socket=$CLUSTER/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$CLUSTER/state
SlurmdSpoolDir=$CLUSTER/spool
SlurmctldPidFile=$CLUSTER/slurmctld.pid
SlurmdPidFile=$CLUSTER/slurmd.pid
SlurmctldLogFile=$CLUSTER/slurmctld.log
SlurmdLogFile=$CLUSTER/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
DependencyParameters=kill_invalid_depend
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=10 State=UP
EOF
    munged -f --key-file="$CLUSTER/munge.key" --socket="$CLUSTER/munge.socket" \
        --pid-file="$CLUSTER/munged.pid" --log-file="$CLUSTER/munged.log" \
        --seed-file="$CLUSTER/munge.seed" || return 0
    slurmctld -D -f "$SLURM_CONF" > "$CLUSTER/slurmctld.out" 2>&1 &
    echo $! > "$CLUSTER/slurmctld.daemon"
    slurmd -D -f "$SLURM_CONF" > "$CLUSTER/slurmd.out" 2>&1 &
    echo $! > "$CLUSTER/slurmd.daemon"
    # up when the node is idle
    for _ in $(seq 1 60); do
        sinfo -h -o %t 2> /dev/null | grep -q idle && { touch "$CLUSTER/up"; return 0; }
        sleep 0.5
    done
}

teardown_file() {
    [ -n "${CLUSTER:-}" ] || return 0
    scancel --full --quiet --name=tr-search 2> /dev/null || true
    scancel --full --quiet --name=tr-merge 2> /dev/null || true
    for d in slurmd slurmctld; do
        [ -f "$CLUSTER/$d.daemon" ] && kill "$(cat "$CLUSTER/$d.daemon")" 2> /dev/null || true
    done
    [ -f "$CLUSTER/munged.pid" ] && kill "$(cat "$CLUSTER/munged.pid")" 2> /dev/null || true
    for d in slurmd slurmctld; do
        [ -f "$CLUSTER/$d.daemon" ] || continue
        for _ in $(seq 1 40); do
            kill -0 "$(cat "$CLUSTER/$d.daemon")" 2> /dev/null || break
            sleep 0.25
        done
    done
}

setup() {
    load helper
    PY=/usr/bin/python3
    cd "$BATS_TEST_TMPDIR"
    [ "$(id -u)" -eq 0 ] || need "the one-node Slurm cluster needs root"
    command -v slurmctld > /dev/null && command -v munged > /dev/null ||
        need "slurm-wlm and munge are not installed (scripts/deps.sh installs them)"
    [ -e "$CLUSTER/up" ] || {
        tail -n 5 "$CLUSTER"/*.out "$CLUSTER"/*.log >&2 2> /dev/null
        need "the one-node Slurm cluster did not start (see its logs above)"
    }
    # 20000 embeddings (10 blocks of 2048 rows), 4 queries
    "$TENSORRUN" "$TR_SRCDIR/pipelines/make-data.yaml" -q -o emb="$PWD/emb.npy" \
        -o q="$PWD/queries.npy" -o scores="$PWD/scores.npy"
    export EMB=$PWD/emb.npy QUERIES=$PWD/queries.npy OUT=$PWD/out
}

@test "sbatch-search.sh: 4 shards in a job array, then the dependent merge: the unsharded run's answers" {
    run timeout 120 "$TR_SRCDIR/pipelines/sbatch-search.sh" --wait 4
    [ "$status" -eq 0 ] || { echo "$output"; cat out/*.log; return 1; }
    for k in 1 2 3 4; do [ -e "out/v-$k.npy" ] && [ -e "out/i-$k.npy" ]; done
    # per shard: the unsharded run's shard_best inputs are the same blocks
    run_tensorrun 0 "$TR_SRCDIR/pipelines/search-sharded.yaml" -i emb=emb.npy -i q=queries.npy \
        -o best=whole-v.npy -o ids=whole-i.npy -o v=all-v.npy -o i=all-i.npy -q
    for k in 1 2 3 4; do
        run_tensorrun 0 "$TR_SRCDIR/pipelines/search-sharded.yaml" --shard $k/4 -i emb=emb.npy \
            -i q=queries.npy -o best=v-{shard}.npy -o ids=i-{shard}.npy -o v=cand-v-{shard}.npy -q
        assert_tensors_equal "out/v-$k.npy" "v-$k.npy"
    done
    run_tensorrun 0 concat cand.npy cand-v-1.npy cand-v-2.npy cand-v-3.npy cand-v-4.npy
    assert_tensors_equal cand.npy all-v.npy
    # the merge is the unsharded search's top k, ids and scores
    run_tensorrun 0 "$TR_SRCDIR/pipelines/search.yaml" -i emb=emb.npy -i q=queries.npy \
        -o best=want-best.npy -o ids=want-ids.npy -q
    assert_tensors_equal out/best.npy want-best.npy
    assert_tensors_equal out/ids.npy want-ids.npy
}

@test "a shard that fails fails the array: sbatch --wait is non-zero and nothing is merged" {
    # shard 3's input is missing
    cat > bad-tensorrun <<EOF
#!/bin/sh
if [ "\${SLURM_ARRAY_TASK_ID:-}" = 3 ]; then exec "$TENSORRUN" "\$@" -i emb=$PWD/missing.npy; fi
exec "$TENSORRUN" "\$@"
EOF
    chmod +x bad-tensorrun
    TENSORRUN=$PWD/bad-tensorrun run timeout 120 "$TR_SRCDIR/pipelines/sbatch-search.sh" --wait 4
    [ "$status" -ne 0 ]
    grep -q "missing.npy" out/shard-3.log
    [ ! -e out/best.npy ] && [ ! -e out/ids.npy ] && [ ! -e out/v.npy ]
    # without --wait the merge job is submitted, then cancelled by the failure
    rm -rf out
    TENSORRUN=$PWD/bad-tensorrun run timeout 60 "$TR_SRCDIR/pipelines/sbatch-search.sh" 4
    [ "$status" -eq 0 ]
    merge=${output##* }
    for _ in $(seq 1 120); do
        squeue -h -j "$merge" 2> /dev/null | grep -q . || break
        sleep 0.5
    done
    [ -z "$(squeue -h -j "$merge" 2> /dev/null)" ]
    [ ! -e out/best.npy ]
}
