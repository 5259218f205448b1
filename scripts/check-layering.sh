#!/usr/bin/env bash
# scripts/check-layering.sh: fails when a package reaches a layer it must not know about.
# See the design notes' architecture.md (../shared/docs outside this repository)
# §5 (dependency direction) and §4 (zap only); README "Architecture".
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)
fail=0
deny() { # deny <dir> <forbidden dir>...
  local dir=$1; shift
  local deps dep bad
  deps=$(go list -deps -f '{{.ImportPath}}' "./$dir/...")
  for dep in $deps; do
    for bad in "$@"; do
      case $dep in
        "$mod/$bad" | "$mod/$bad/"*) echo "layering: $dir must not depend on $bad (reaches $dep)"; fail=1 ;;
      esac
    done
  done
}
deny protocol   log sharegroup broker cmd integration
deny log        sharegroup broker cmd integration
deny sharegroup protocol log broker cmd integration
deny broker     cmd integration
# The test tools under integration/ speak Kafka over sockets to any broker:
# none of Shoal's own packages, so they test Shoal the way a client does.
deny integration/faultproxy protocol log sharegroup broker cmd
deny integration/workload   protocol log sharegroup broker cmd integration/faultproxy
# The share-group core (not its store/ adapter) imports the standard library only.
extra=$(go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' ./sharegroup | grep -vx "$mod/sharegroup" || true)
if [ -n "$extra" ]; then echo "layering: sharegroup core must be stdlib-only, imports: $extra"; fail=1; fi
# Logging is zap only: no package (tests included) imports the standard "log" or "log/slog".
logs=$(go list -test -f '{{$p := .ImportPath}}{{range .Imports}}{{if or (eq . "log") (eq . "log/slog")}}{{$p}} imports {{.}}{{"\n"}}{{end}}{{end}}' ./... | sort -u)
if [ -n "$logs" ]; then echo "layering: use go.uber.org/zap, not the standard logger:"; echo "$logs"; fail=1; fi
if [ "$fail" = 0 ]; then echo "layering: ok"; fi
exit $fail
