#!/usr/bin/env bash
# The MCP demo, offline: `make demo-mcp` builds the kernel and an MCP server
# written with the official Go SDK (internal/mcptest/server), then runs this.
# A scripted model calls the server's tools; policy denies one call and asks
# before another; a person approves it.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
kernel="$root/bin/kernel"
demo="$root/bin/demo-mcp"
rm -rf "$demo"
mkdir -p "$demo/workspace" "$demo/server"
cat > "$demo/demo.yaml" <<LAYER
workspace: workspace
store: {dir: store}
tools:
  mcp:
    - name: notes
      command: [$root/bin/mcp/mcp-testserver, -calls, $demo/server/calls.log]
      grant: {fs: [{path: $demo/server, mode: rw}]}   # confined: it may write only here
      tools: [echo, add, write_note]
      tiers: {echo: read_only, add: read_only}
      timeout: 10s
LAYER
k() { "$kernel" "$@" --config "$root/examples/mcp/kernel.yaml" --config "$demo/demo.yaml"; }
# Bold headings only on a terminal (and never with NO_COLOR set).
bold='' reset=''
if [ -t 2 ] && [ -z "${NO_COLOR:-}" ]; then bold=$'\033[1m' reset=$'\033[0m'; fi
step() { printf '\n%s== %s%s\n$ %s\n\n' "$bold" "$1" "$reset" "$2" >&2; }

step "1. The MCP server's tools as the kernel registered them (tiers are the operator's)" "kernel mcp ls"
k mcp ls

step "2. A run: the model calls MCP tools through the one pipeline" \
  'kernel run "Say hello, add 19 and 23, and store my notes"'
k run "Say hello, add 19 and 23, and store my notes" || true
id=$(k sessions ls 2>/dev/null | awk 'NR==2 {print $1}')

step "3. A human approves the pending note; the call reaches the server" "kernel approve --yes $id"
k approve --yes "$id" --note "fine"

printf '\n== What reached the MCP server (the invalid and the denied call never did):\n' >&2
cat "$demo/server/calls.log" >&2
printf '\nExplore: bin/kernel sessions show %s --store bin/demo-mcp/store\n' "$id" >&2
