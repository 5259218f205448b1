#!/usr/bin/env bash
# scripts/fuzz.sh: run every fuzz target in the module for a short time.
# Go fuzzes one target per `go test -fuzz` run, so we loop over them.
#   FUZZTIME  per target, a count (60000x) or a duration (10s); default
#             60000x. A count, because Go 1.26's fuzz coordinator can fail a
#             duration-bounded run with "context deadline exceeded" and no
#             crasher when the deadline lands mid-execution (golang/go#75804,
#             fixed in Go 1.27); a count has no deadline to race.
#   FUZZ_RUN  optional regexp: only targets whose name matches.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-60000x}
filter=${FUZZ_RUN:-.}
# "dir<TAB>FuzzName" for every `func FuzzXxx(f *testing.F)` in a _test.go
# file, skipping directories the go tool ignores.
targets=$(find . \( -name testdata -o -name vendor -o -name '.?*' -o -name '_*' \) -prune -o -name '*_test.go' -print0 \
  | xargs -0 -r grep -H -E '^func Fuzz[A-Za-z0-9_]*\(' \
  | sed -E 's#^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*#\1\t\2#' \
  | sort -u | grep -E "	.*${filter}" || true)
if [ -z "$targets" ]; then
  echo "fuzz: no fuzz targets found"
  exit 0
fi
n=$(printf '%s\n' "$targets" | wc -l)
echo "fuzz: $n target(s), $fuzztime each"
failed=()
while IFS=$'\t' read -r dir name; do
  echo "fuzz: $dir $name"
  if ! go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" "$dir"; then
    failed+=("$dir $name")
  fi
done <<< "$targets"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED targets (crashers are saved under each package's testdata/fuzz):"
  printf '  %s\n' "${failed[@]}"
  exit 1
fi
echo "fuzz: all $n target(s) passed"
