#!/usr/bin/env bash
# Ray scaling benchmark (issue 18, "Beyond one machine, on Ray"): `heloom loadtest` against
# `heloom serve --ray` on a local Ray cluster, first of ONE node, then of NODES nodes, each
# node CPUS CPUs (its heloom node server runs CPUS threads). Every result is decrypted and
# checked by the load test. Target (a 16-core machine, the defaults): 4 nodes of 4 CPUs give
# >= 3.2x the sustained throughput of one such node.
#
#   bench/ray/scale.sh                       # NODES=4 CPUS=4 DURATION=60 LOG_N=14
#   NODES=2 CPUS=1 DURATION=10 bench/ray/scale.sh   # a smoke run on a small machine
#   BACKEND=local bench/ray/scale.sh         # no Ray: `heloom serve --local-nodes`, the same
#                                            # front, placement and data path, nodes pinned
#                                            # to their own cores (needs only the binary)
#   BACKEND=local CPUS=3 bench/ray/scale.sh  # on ONE 16-core box: the front and the load test
#                                            # take about 2.5 cores at 4 x 4's rate, so 4 x 3
#                                            # leaves them the 4 cores a real cluster's head has
#
# Needs: target/release/heloom (cargo build --release -p heloom-cli), .venv with the heloom
# package and Ray (./run.sh python -c 0; .venv/bin/pip install 'ray[default]>=2.9').
# Writes bench/results/ray-scale-<host>/{summary.json,summary.txt,one,many} (OUT= to change).
set -euo pipefail
cd "$(dirname "$0")/../.."

NODES=${NODES:-4}
CPUS=${CPUS:-4}
DURATION=${DURATION:-60}
LOG_N=${LOG_N:-14}
TENANTS=${TENANTS:-8}
# Capacity: a closed loop of CLIENTS client threads, each submitting its next job when its
# last one ends, for DURATION seconds (RATE only weighs the tenants); results are checked
# after the run, so the checking takes no cores from the nodes. (An open loop at a rate far
# above capacity would submit every arrival of the window: hours of backlog.)
RATE=${RATE:-100}
CLIENTS=${CLIENTS:-64}
# 80% of linear: 3.2x for the default 4 nodes.
TARGET=${TARGET:-$(awk -v n="$NODES" 'BEGIN { print 0.8 * n }')}
BACKEND=${BACKEND:-ray}
PY=${PYTHON:-.venv/bin/python}
BIN=${HELOOM_BIN:-target/release/heloom}
HOST=$(hostname -s 2>/dev/null || echo host)
OUT=${OUT:-bench/results/$([ "$BACKEND" = local ] && echo local-nodes || echo ray)-scale-$HOST}

[ -x "$BIN" ] || { echo "scale.sh: $BIN missing: cargo build --release -p heloom-cli" >&2; exit 1; }
if [ "$BACKEND" = local ]; then
  command -v "$PY" >/dev/null 2>&1 || PY=python3
else
  "$PY" -c 'import ray, heloom' 2>/dev/null || {
    echo "scale.sh: $PY lacks heloom or ray: ./run.sh python -c 0 && $PY -m pip install 'ray[default]>=2.9'" >&2
    exit 1
  }
fi
CORES=$(nproc)
if [ $((NODES * CPUS)) -gt "$CORES" ]; then
  echo "scale.sh: warning: $NODES nodes x $CPUS CPUs > $CORES cores here: the nodes share cores and the ratio means little" >&2
fi
mkdir -p "$OUT"
WORK=$(mktemp -d -t heloom-ray-scale-XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
cat >"$WORK/cluster.py" <<'PYEOF'
import sys

from ray.cluster_utils import Cluster

n, cpus, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
args = {"num_cpus": cpus, "object_store_memory": 200 * 2**20}
c = Cluster(initialize_head=True, head_node_args={**args, "include_dashboard": False})
try:
    for _ in range(n - 1):
        c.add_node(**args)
    c.wait_for_nodes()
    with open(out, "w") as f:
        f.write(c.address)
    sys.stdin.read()
finally:
    c.shutdown()
PYEOF

# run NAME N: a local Ray cluster of N nodes, the front on it, the load test; prints the
# sustained throughput (jobs/s) and leaves the report in $OUT/NAME.
run() {
  local name=$1 n=$2 dir="$WORK/$1" cluster="" hold=""
  mkdir -p "$dir"
  if [ "$BACKEND" = local ]; then
    local pin=""
    [ $((n * CPUS)) -le "$CORES" ] && command -v taskset >/dev/null && pin=--pin-nodes
    # The front and the load test on the cores the nodes leave (as if the nodes were other
    # machines): unpinned, the scheduler wakes their threads on the nodes' cores.
    FRONT_PIN=()
    [ -n "$pin" ] && [ $((n * CPUS)) -lt "$CORES" ] && FRONT_PIN=(taskset -c "$((n * CPUS))-$((CORES - 1))")
    "${FRONT_PIN[@]}" "$BIN" serve --data "$dir/data" --listen 127.0.0.1:0 --allow-insecure \
      --local-nodes "$n" --node-threads "$CPUS" $pin 2>"$dir/front.log" &
  else
    # The cluster lives while its stdin (a fifo we hold open) does.
    mkfifo "$dir/hold"
    "$PY" "$WORK/cluster.py" "$n" "$CPUS" "$dir/address" <"$dir/hold" >"$dir/cluster.log" 2>&1 &
    cluster=$!
    PIDS+=($cluster)
    exec {hold}>"$dir/hold"
    for _ in $(seq 600); do [ -s "$dir/address" ] && break; sleep 0.2; done
    [ -s "$dir/address" ] || { cat "$dir/cluster.log" >&2; exit 1; }
    "$BIN" serve --data "$dir/data" --listen 127.0.0.1:0 --allow-insecure \
      --ray "$(cat "$dir/address")" --ray-python "$PY" 2>"$dir/front.log" &
  fi
  local front=$!
  PIDS+=($front)
  [ "$BACKEND" = local ] || FRONT_PIN=()
  local url=""
  for _ in $(seq 1200); do
    url=$(grep -so 'listening on http://[0-9.:]*' "$dir/front.log" | head -1 | cut -d' ' -f3 || true)
    [ -n "$url" ] && break
    kill -0 "$front" 2>/dev/null || { cat "$dir/front.log" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$url" ] || { cat "$dir/front.log" >&2; exit 1; }
  echo "== $name: $n node(s) x $CPUS CPUs, front $url" >&2
  "${FRONT_PIN[@]}" "$BIN" loadtest --url "$url" --data "$dir/data" --tenants "$TENANTS" --rate "$RATE" \
    --duration "$DURATION" --log-n "$LOG_N" --clients "$CLIENTS" --warmup 5 --closed-loop --check-after \
    --out "$OUT/$name" --json >"$OUT/$name/loadtest-stdout.json" 2>"$dir/loadtest.log" || {
      tail -20 "$dir/loadtest.log" >&2; cp "$dir/front.log" "$OUT/$name/front.log"
      grep -m 20 'lost' "$dir/front.log" >&2
      echo "scale.sh: the load test failed ($name)" >&2; exit 1; }
  curl -s "$url/metrics" | grep '^heloom_ray_' >"$OUT/$name/ray-metrics.txt" || true
  # CPU seconds of the front and of everything it started (the bridge, the node servers), so
  # a run shows whether the front or the nodes were the limit.
  cpu_of() { awk '{ printf "%.1f", ($14 + $15) / 100 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
  desc() { local c; for c in $(pgrep -P "$1"); do echo "$c"; desc "$c"; done; }
  local nodes_cpu=0 c
  for c in $(desc "$front"); do nodes_cpu=$(awk -v a="$nodes_cpu" -v b="$(cpu_of "$c")" 'BEGIN { print a + b }'); done
  printf 'front_cpu_s=%s\nnodes_cpu_s=%s\n' "$(cpu_of "$front")" "$nodes_cpu" >"$OUT/$name/cpu.txt"
  # CPU by thread name (digits dropped), the front's and the node servers' (live threads;
  # the front's per-job threads are gone by now, their CPU only in its total).
  threads_cpu() {
    local label=$1 p t
    shift
    for p in "$@"; do
      for t in /proc/"$p"/task/*; do
        printf '%s %s\n' "$(tr -d '0-9' <"$t/comm")" "$(awk '{ print $14 + $15 }' "$t/stat")"
      done
    done 2>/dev/null | awk -v w="$label" '{ s[$1] += $2; n[$1]++ } END { for (k in s) printf "%s %s x%d %.1f s\n", w, k, n[k], s[k] / 100 }' | sort -k4 -rn
  }
  { threads_cpu front_thread "$front"; threads_cpu node_thread $(desc "$front"); } >>"$OUT/$name/cpu.txt" || true
  kill "$front"; wait "$front" 2>/dev/null || true
  if [ -n "$cluster" ]; then
    exec {hold}>&-
    wait "$cluster" 2>/dev/null || true
  fi
  cp "$dir/front.log" "$OUT/$name/front.log"
}

mkdir -p "$OUT/one" "$OUT/many"
run one 1
run many "$NODES"
"$PY" - "$OUT" "$NODES" "$CPUS" "$TARGET" "$CORES" "$BACKEND" <<'PYEOF'
import json, sys
out, nodes, cpus, target, cores = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
backend = sys.argv[6]
def load(name):
    with open(f"{out}/{name}/loadtest-stdout.json") as f:
        return json.load(f)
def cpu(name):
    try:
        with open(f"{out}/{name}/cpu.txt") as f:
            return {k: float(v) for k, v in (l.strip().split("=") for l in f if "=" in l)}
    except (OSError, ValueError):
        return {}
one, many = load("one"), load("many")
t1, tn = one["overall"]["sustained_jobs_s"], many["overall"]["sustained_jobs_s"]
ratio = tn / t1 if t1 > 0 else 0.0
ok = one["ok"] and many["ok"] and ratio >= target
s = {
    "backend": backend, "nodes": nodes, "cpus_per_node": cpus, "machine_cores": cores,
    "one_node_jobs_s": t1, "nodes_jobs_s": tn, "speedup": ratio, "target": target,
    "all_results_correct": one["overall"]["wrong"] == 0 and many["overall"]["wrong"] == 0,
    "jobs_done": [one["overall"]["done"], many["overall"]["done"]],
    "problems": one["problems"] + many["problems"], "ok": ok,
    "cpu_s": {"one": cpu("one"), "many": cpu("many")},
}
with open(f"{out}/summary.json", "w") as f:
    json.dump(s, f, indent=2)
text = (f"heloom serve {'--ray' if backend == 'ray' else '--local-nodes'}, load test: 1 node x {cpus} CPUs {t1:.2f} jobs/s; {nodes} nodes x {cpus} CPUs "
        f"{tn:.2f} jobs/s; speedup {ratio:.2f}x (target {target}x) on {cores} cores; "
        f"results correct: {s['all_results_correct']}; {'PASS' if ok else 'FAIL'}\n"
        + "".join(f"  {k}: front {c.get('front_cpu_s', 0):.1f} CPU s, node servers {c.get('nodes_cpu_s', 0):.1f} CPU s "
                  f"over {(one if k == 'one' else many)['overall']['done']} jobs\n"
                  for k, c in s["cpu_s"].items()))
with open(f"{out}/summary.txt", "w") as f:
    f.write(text)
print(text, end="")
sys.exit(0 if ok else 1)
PYEOF
