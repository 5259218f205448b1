#!/usr/bin/env bash
# scripts/test.sh: the whole test suite under the race detector.
# Extra arguments go to `go test` (e.g. -timeout 20m, -run TestX).
set -euo pipefail
cd "$(dirname "$0")/.."
exec go test -race -count=1 "$@" ./...
