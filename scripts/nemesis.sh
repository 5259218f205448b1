#!/usr/bin/env bash
# scripts/nemesis.sh: the long profile of the cluster's network-fault test
# (criterion C5 of the cluster issue). CI runs one round of the five faults
# (leader isolated, minority split, bridge, leader paused 5 s, flapping
# links) inside `go test ./...`; this runs ROUNDS of them (default 50, so
# 250 faults; about 35 minutes). A failure prints its NEMESIS_SEED; set it
# to replay the same victims and flaps.
set -euo pipefail
cd "$(dirname "$0")/.."
exec env CLUSTER_NEMESIS_ROUNDS="${ROUNDS:-50}" go test ./integration -run 'TestClusterNemesis$' -count=1 -timeout 0 -v
