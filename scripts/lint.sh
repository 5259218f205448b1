#!/usr/bin/env bash
# scripts/lint.sh: formatting and vet. gofmt must report nothing; go vet must pass.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
# Every .go file the go tool would build: skip testdata and dot/underscore dirs.
unformatted=$(find . \( -name testdata -o -name '.?*' -o -name '_*' \) -prune -o -name '*.go' -print0 \
  | xargs -0 -r gofmt -l)
if [ -n "$unformatted" ]; then
  echo "lint: gofmt -l lists files that need formatting (run gofmt -w):"
  echo "$unformatted"
  fail=1
fi
if ! go vet ./...; then
  echo "lint: go vet failed"
  fail=1
fi
if [ "$fail" = 0 ]; then echo "lint: ok"; fi
exit $fail
