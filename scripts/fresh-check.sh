#!/usr/bin/env bash
# make fresh-check: what a new user on a fresh machine gets. Clones this
# checkout (committed state: `git clone` of HEAD) into a temp dir and runs
# the README's two commands there with empty Go and XDG caches, twice: cold
# (everything downloaded and compiled) and warm (nothing changed). Prints
# the four timings at the end. Modules come from the module proxy (GOPROXY
# as configured); nothing is read from this machine's caches.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
keep=${FRESH_CHECK_KEEP:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/agentkernel-fresh.XXXXXX")
cleanup() {
  if [ -n "$keep" ]; then echo "fresh-check: kept $tmp" >&2; return; fi
  chmod -R u+w "$tmp" 2>/dev/null || true # the module cache is read-only
  rm -rf "$tmp"
}
trap cleanup EXIT

if [ -n "$(git -C "$src" status --porcelain --untracked-files=no)" ]; then
  echo "fresh-check: note: uncommitted changes are not part of the clone" >&2
fi
git clone -q "$src" "$tmp/agentkernel"
echo "fresh-check: cloned $(git -C "$tmp/agentkernel" rev-parse --short HEAD) into $tmp/agentkernel" >&2

mkdir -p "$tmp"/{gopath,gomodcache,gocache,home,xdg-cache,xdg-config,xdg-data,xdg-state}
export GOPATH="$tmp/gopath" GOMODCACHE="$tmp/gomodcache" GOCACHE="$tmp/gocache"
export GOFLAGS=-modcacherw HOME="$tmp/home"
export XDG_CACHE_HOME="$tmp/xdg-cache" XDG_CONFIG_HOME="$tmp/xdg-config"
export XDG_DATA_HOME="$tmp/xdg-data" XDG_STATE_HOME="$tmp/xdg-state"
unset GOBIN

declare -A took
timed() { # timed NAME make TARGET
  local name=$1; shift
  echo "fresh-check: == $name: $*" >&2
  local start=$SECONDS
  if ! (cd "$tmp/agentkernel" && "$@"); then
    echo "fresh-check: FAILED: $name ($* after $((SECONDS - start))s)" >&2
    exit 1
  fi
  took[$name]=$((SECONDS - start))
}
timed "make demo (cold)" make demo
timed "make test (cold)" make test
timed "make demo (warm)" make demo
timed "make test (warm)" make test

if [ -n "$(git -C "$tmp/agentkernel" status --porcelain)" ]; then
  echo "fresh-check: FAILED: the runs changed the checked-in tree:" >&2
  git -C "$tmp/agentkernel" status --short >&2
  exit 1
fi

fmt() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
echo
echo "fresh-check: passed on $(uname -sm), $(nproc 2>/dev/null || echo ?) cores, load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo ?)"
for n in "make demo (cold)" "make test (cold)" "make demo (warm)" "make test (warm)"; do
  printf '  %-18s %s\n' "$n" "$(fmt "${took[$n]}")"
done
