#!/usr/bin/env bash
# scripts/stability.sh: the long profile of the cluster's leader-stability
# test (criterion C8 of the cluster issue): SECONDS_RUN (default 60) s of
# saturating acks=all produce on six RF 3 partitions of three broker
# processes, then 0 leader changes (partition leaders, leader epochs, the
# metadata leader, and no election logged by any broker). CI runs the
# same test for 10 s inside `go test ./...`.
set -euo pipefail
cd "$(dirname "$0")/.."
exec env CLUSTER_STABILITY_SECONDS="${SECONDS_RUN:-60}" go test ./integration -run 'TestClusterLeaderStability$' -count=1 -timeout 0 -v
