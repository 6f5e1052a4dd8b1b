#!/usr/bin/env bash
# The agentkernel demo, offline: `make demo` builds the kernel, the git
# plugin and the WASM tools, then runs this. A scripted model (script.yaml)
# plays the part of an LLM, so every run is the same.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
kernel="$root/bin/kernel"
demo="$root/bin/demo"

# A fresh copy of the example workspace with a small git history, so the
# demo never changes the repository and the git plugin has commits to show.
rm -rf "$demo"
mkdir -p "$demo"
cp -R "$root/examples/demo/workspace" "$demo/workspace"
(
  cd "$demo/workspace"
  export GIT_AUTHOR_NAME="Ada Example" GIT_AUTHOR_EMAIL=ada@example.com
  export GIT_COMMITTER_NAME="Ada Example" GIT_COMMITTER_EMAIL=ada@example.com
  git init -q
  git add README.md go.mod cmd internal
  GIT_AUTHOR_DATE="2026-11-02T10:00:00Z" GIT_COMMITTER_DATE="2026-11-02T10:00:00Z" git commit -q -m "linkcheck: report broken relative links"
  git add -A
  GIT_AUTHOR_DATE="2026-11-20T16:30:00Z" GIT_COMMITTER_DATE="2026-11-20T16:30:00Z" git commit -q -m "docs: add the user guide and the nightly report job"
)

# The layer over examples/demo/kernel.yaml: the copy, a private store, and
# the git plugin pinned to the binary make just built.
cat > "$demo/demo.yaml" <<LAYER
workspace: workspace
store: {dir: store}
tools:
  plugins:
    - name: git
      path: $root/bin/plugins/git
      sha256: $(cut -d' ' -f1 "$root/bin/plugins/git.sha256")
      dir: workspace
      env: [PATH, HOME]
      timeout: 30s
      # Confined (docs/sandbox.md): git from /usr, the workspace read-only.
      sandbox: {fs: [{path: /usr, mode: ro}, {path: workspace, mode: ro}]}
LAYER
k() { "$kernel" "$@" --config "$root/examples/demo/kernel.yaml" --config "$demo/demo.yaml"; }

# Every native process below (run_command, the git plugin) runs confined;
# refuse to go on if this machine cannot confine them.
if ! k sandbox check --json | grep -q '"runs": false'; then
  echo "sandbox: run_command and the git plugin run confined (user/PID/mount/net namespaces, Landlock, rlimits; kernel sandbox check)" >&2
else
  k sandbox check >&2
  echo "sandbox: a native tool cannot be confined on this machine (see above)" >&2
  exit 1
fi
# Bold headings only on a terminal (and never with NO_COLOR set).
bold='' reset=''
if [ -t 2 ] && [ -z "${NO_COLOR:-}" ]; then bold=$'\033[1m' reset=$'\033[0m'; fi
step() { printf '\n%s== %s%s\n$ %s\n\n' "$bold" "$1" "$reset" "$2" >&2; }

step "1. A question: built-in tools, the git plugin, jq in WASM; secrets arrive redacted" \
  'kernel run "What does this project do, what changed recently, and how is the nightly report deployed?"'
k run "What does this project do, what changed recently, and how is the nightly report deployed?"
id=$(k sessions ls 2>/dev/null | awk 'NR==2 {print $1}')

step "2. A change in the same session: policy denies rm -rf and asks before editing outside src/" \
  "kernel run --session $id \"Fix the broken setup link in docs/guide.md\""
k run --session "$id" "Fix the broken setup link in docs/guide.md"

step "3. A human approves; the edit runs and the run continues" "kernel approve --yes $id"
k approve --yes "$id" --note "README.md has the setup steps"

printf '\n== The edit, in the demo copy of the workspace:\n' >&2
git -C "$demo/workspace" --no-pager diff --stat >&2

step "4. Memory: a new session recalls what the first one read" \
  'kernel memory search "nightly report upload"; kernel run "Where does the nightly report go?"'
k memory search -k 1 "nightly report upload"
k run --script "$root/examples/demo/memory-script.yaml" "Where does the nightly report go?"
printf '\nExplore: bin/kernel sessions show %s --store bin/demo/store\n' "$id" >&2
