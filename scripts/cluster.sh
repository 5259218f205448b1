#!/usr/bin/env bash
# scripts/cluster.sh: a three-broker Shoal cluster on 127.0.0.1 for a tour
# and for tests (docs/CLUSTER.md).
#
#   scripts/cluster.sh up          build cmd/shoal, start brokers 1-3
#   scripts/cluster.sh down        stop them (SIGTERM: a clean shutdown)
#   scripts/cluster.sh kill N      SIGKILL broker N
#   scripts/cluster.sh restart N   start broker N again (after kill or down)
#   scripts/cluster.sh status      which brokers run
#
# Broker N serves Kafka on 127.0.0.1:909(1+N) (9092, 9093, 9094), raft on
# 127.0.0.1:919(1+N) and /metrics on 127.0.0.1:964(3+N); its data and
# log are in $CLUSTER_DIR/N (default ./shoal-cluster/N).
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${CLUSTER_DIR:-$PWD/shoal-cluster}"
bin="$dir/shoal"
voters="1@127.0.0.1:9192,2@127.0.0.1:9193,3@127.0.0.1:9194"

pidfile() { echo "$dir/$1/shoal.pid"; }
running() { [ -f "$(pidfile "$1")" ] && kill -0 "$(cat "$(pidfile "$1")")" 2>/dev/null; }

start() {
  local n=$1
  if running "$n"; then echo "broker $n already runs (pid $(cat "$(pidfile "$n")"))"; return; fi
  mkdir -p "$dir/$n"
  "$bin" --node-id "$n" --listen "127.0.0.1:$((9091 + n))" --voters "$voters" \
    --peer-listen "127.0.0.1:$((9191 + n))" --http-addr "127.0.0.1:$((9643 + n))" \
    --data-dir "$dir/$n/data" --log-level "${LOG_LEVEL:-info}" >>"$dir/$n/shoal.log" 2>&1 &
  echo $! >"$(pidfile "$n")"
  echo "broker $n: kafka 127.0.0.1:$((9091 + n)), pid $!, log $dir/$n/shoal.log"
}

signal() { # signal N SIG
  if running "$1"; then
    local pid; pid=$(cat "$(pidfile "$1")")
    kill -"$2" "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    rm -f "$(pidfile "$1")"
    echo "broker $1 stopped ($2)"
  else
    echo "broker $1 is not running"
  fi
}

case "${1:-}" in
  up)
    mkdir -p "$dir"
    go build -o "$bin" ./cmd/shoal
    for n in 1 2 3; do start "$n"; done
    echo "seeds: 127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"
    ;;
  down) for n in 1 2 3; do signal "$n" TERM; done ;;
  kill) signal "${2:?broker number}" KILL ;;
  restart) start "${2:?broker number}" ;;
  status) for n in 1 2 3; do if running "$n"; then echo "broker $n: up"; else echo "broker $n: down"; fi; done ;;
  *) sed -n '2,13p' "$0"; exit 2 ;;
esac
