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
# Inside broker/: an allow-list of the module's packages each package under broker/ may
# import directly (its tests, internal and external, included), as Kafka's import-control
# does for its coordinators. Only direct imports are checked: what a package reaches through
# another is that one's rule. Nothing under broker/ imports the root package or a sibling it
# has no rule for. broker/doc.go is the package map; README "Architecture" the picture.
ruled=" broker "
allow() { # allow <dir> <module packages it may import directly>...
  local dir=$1; shift
  local imp a ok imps
  ruled+="$dir "
  [ -d "$dir" ] || return 0 # a rule written before its package lands
  imps=$(go list -f '{{join .Imports "\n"}}{{"\n"}}{{join .TestImports "\n"}}{{"\n"}}{{join .XTestImports "\n"}}' "./$dir" | sort -u)
  for imp in $imps; do
    case $imp in "$mod"/*) ;; *) continue ;; esac
    [ "$imp" = "$mod/$dir" ] && continue # an external test of the package itself
    ok=0
    for a in "$@"; do [ "$imp" = "$mod/$a" ] && ok=1; done
    if [ $ok = 0 ]; then echo "layering: $dir must not import ${imp#"$mod"/}"; fail=1; fi
  done
}
allow broker/kafkaerr  log sharegroup
allow broker/meta
allow broker/metrics
allow broker/records   protocol
allow broker/configs   broker/kafkaerr
allow broker/topics    broker/metrics broker/meta broker/kafkaerr log
allow broker/quota     broker/meta broker/kafkaerr
allow broker/security  broker/meta
allow broker/acl       broker/meta
allow broker/dedup     broker/topics broker/configs broker/records log protocol
allow broker/groups    broker/topics broker/meta protocol
allow broker/sqs       broker/share broker/acl sharegroup
allow broker/share     broker/topics broker/quota broker/configs broker/records broker/metrics \
                       broker/meta broker/kafkaerr sharegroup sharegroup/store log protocol
allow broker/txn       broker/groups broker/topics broker/meta log protocol
allow broker/replica   log log/raftlog protocol
allow broker/raftnet
allow broker/cluster   broker/replica broker/raftnet broker/clustertest log log/raftlog protocol
allow broker/clustertest broker/replica log log/raftlog protocol
# Every package under broker/ has a rule above (a misspelt rule leaves its package without
# one): a new package is placed on purpose.
for p in $(go list ./broker/...); do
  case $ruled in *" ${p#"$mod"/} "*) ;; *) echo "layering: ${p#"$mod"/} has no rule in scripts/check-layering.sh"; fail=1 ;; esac
done
# Every package under broker/ says in a doc.go what it owns and which locks it takes.
for d in $(go list -f '{{.Dir}}' ./broker/...); do
  [ -f "$d/doc.go" ] || { echo "layering: ${d#"$PWD"/} has no doc.go"; fail=1; }
done
# The front door: outside broker/, only package broker itself is imported (tests included).
# Captured first, then matched: a grep that stops early under pipefail kills go list.
imps=$(go list -test -f '{{.ImportPath}}|{{join .Imports " "}}' ./...)
bad=$(awk -F'|' -v m="$mod" '{
    p = $1; sub(/ \[.*/, "", p); sub(/(_test|\.test)$/, "", p)   # a test variant is its package
    if (p == m "/broker" || index(p, m "/broker/") == 1) next
    n = split($2, imp, " ")
    for (i = 1; i <= n; i++) if (index(imp[i], m "/broker/") == 1) print p " imports " imp[i]
  }' <<<"$imps" | sort -u)
if [ -n "$bad" ]; then echo "layering: broker internals imported from outside broker/:"; echo "$bad"; fail=1; fi
# The storage side speaks no wire types.
for d in broker/meta broker/metrics; do
  [ -d "$d" ] || continue
  imps=$(go list -f '{{join .Imports "\n"}}' "./$d")
  if grep -q '^github.com/twmb/franz-go' <<<"$imps"; then echo "layering: $d must not import franz-go"; fail=1; fi
done
# Consensus comes from etcd raft, used by the replica storage (log/raftlog) and, when it
# lands, the replica (broker/replica) only: nothing else votes or computes commit
# (issue 29, criterion C14). Tests included.
imps=$(go list -test -f '{{.ImportPath}}|{{join .Imports " "}}' ./...)
rafts=$(awk -F'|' -v m="$mod" '{
    p = $1; sub(/ \[.*/, "", p); sub(/(_test|\.test)$/, "", p)
    if (p == m "/log/raftlog" || p == m "/broker/replica") next
    n = split($2, imp, " ")
    for (i = 1; i <= n; i++) if (index(imp[i], "go.etcd.io/raft/") == 1) print p " imports " imp[i]
  }' <<<"$imps" | sort -u)
if [ -n "$rafts" ]; then echo "layering: only log/raftlog and broker/replica may import go.etcd.io/raft/v3:"; echo "$rafts"; fail=1; fi
# The share-group core (not its store/ adapter) imports the standard library only.
extra=$(go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' ./sharegroup | grep -vx "$mod/sharegroup" || true)
if [ -n "$extra" ]; then echo "layering: sharegroup core must be stdlib-only, imports: $extra"; fail=1; fi
# Logging is zap only: no package (tests included) imports the standard "log" or "log/slog".
logs=$(go list -test -f '{{$p := .ImportPath}}{{range .Imports}}{{if or (eq . "log") (eq . "log/slog")}}{{$p}} imports {{.}}{{"\n"}}{{end}}{{end}}' ./... | sort -u)
if [ -n "$logs" ]; then echo "layering: use go.uber.org/zap, not the standard logger:"; echo "$logs"; fail=1; fi
# A package's readouts.go holds read-outs for the root's tests (state a white-box test read
# before the move): no production code outside the package calls them, so they never become
# a second way into its state. (Inside it, sharegroup's own SPSO() and the like share names.)
for r in broker/*/readouts.go; do
  [ -f "$r" ] || continue
  names=$(grep -ho '^func ([a-z]* \*[A-Za-z]*) [A-Z][A-Za-z]*' "$r" | awk '{print $4}' | sort -u | paste -sd'|')
  [ -n "$names" ] || continue
  uses=$(git ls-files --cached --others --exclude-standard '*.go' ':!:*_test.go' | grep -v "^$(dirname "$r")/" | xargs grep -nE "\.($names)\(" || true)
  if [ -n "$uses" ]; then echo "layering: test read-outs of $r called from production code:"; echo "$uses"; fail=1; fi
done
if [ "$fail" = 0 ]; then echo "layering: ok"; fi
exit $fail
