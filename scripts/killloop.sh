#!/usr/bin/env bash
# scripts/killloop.sh: the long profile of the cluster kill loop
# (criteria C1, C2, C7 of the cluster issue): three broker processes,
# four idempotent producers on six partitions, KILLS SIGKILLs (default
# 100) of partition leaders and, every fifth, of the metadata leader;
# then every acknowledged record is read back once, in order, and the
# replicas' logs compared byte for byte. CI runs 4 kills.
set -euo pipefail
cd "$(dirname "$0")/.."
CLUSTER_KILLS="${KILLS:-100}" exec go test ./integration -run 'TestClusterKillLoop$' -count=1 -timeout 0 -v
