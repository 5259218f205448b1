#!/usr/bin/env bash
# scripts/sim.sh: the long profile of the replica simulator (criterion C6
# of the cluster issue). CI runs the short one (20 seeds per fault
# profile, inside `go test ./...`); this runs SEEDS per profile (default
# 2000, so 10,000 seeds over the five profiles) from seed FROM (default 1).
# A failure prints its seed; `go test ./broker/clustertest -run
# 'TestSimulator$/<profile>' -sim.seed=N -sim.seeds=1 -v` replays it with
# its trace.
set -euo pipefail
cd "$(dirname "$0")/.."
exec go test ./broker/clustertest -run 'TestSimulator$' -count=1 -timeout 0 \
  -sim.seeds="${SEEDS:-2000}" -sim.seed="${FROM:-1}" -v
