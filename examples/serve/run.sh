#!/usr/bin/env bash
# `make serve`: kernel serve on the demo configuration, offline (a scripted
# model), with a fresh workspace and store, an API key, and one run that
# waits for your approval. Open the printed URL, paste the key, approve.
# LISTEN (default 127.0.0.1:8080) and DEMO_DIR (default bin/serve-demo,
# emptied first) change where it listens and what it writes.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
kernel="$root/bin/kernel"
demo="${DEMO_DIR:-$root/bin/serve-demo}"
listen="${LISTEN:-127.0.0.1:8080}"

rm -rf "$demo"
mkdir -p "$demo"
cp -R "$root/examples/demo/workspace" "$demo/workspace"
cat > "$demo/serve.yaml" <<LAYER
workspace: workspace
store: {dir: store}
model: {script: $root/examples/serve/script.yaml}
LAYER
cfg=(--config "$root/examples/demo/kernel.yaml" --config "$demo/serve.yaml")
# The key file, named on every command that reads it: keys created with
# the same --keys are the running server's (it rereads the file).
keys="$demo/keys.json"

key=$("$kernel" keys create you --scopes run,read,approve --keys "$keys" "${cfg[@]}" 2>/dev/null)
"$kernel" serve "${cfg[@]}" --keys "$keys" --listen "$listen" --access-log "$demo/access.log" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT INT TERM
for _ in $(seq 1 100); do
  curl -fsS "http://$listen/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
api() { curl -fsS -H "Authorization: Bearer $key" -H 'Content-Type: application/json' "$@"; }
sid=$(api -X POST "http://$listen/v1/sessions" -d '{"title":"Summarise the project"}' | sed -E 's/.*"id":"([^"]+)".*/\1/')
api -X POST "http://$listen/v1/sessions/$sid/runs" -d '{"prompt":"Write a short summary of this project to NOTES.md"}' >/dev/null

cat <<MSG

  kernel serve is running with the demo configuration (scripted model, offline).
  A run waits for your approval: it wants to write NOTES.md outside src/.

    open   http://$listen/
    key    $key

  Paste the key, look at the diff, approve (or reject) it, and watch the run
  finish. The Sessions tab shows the transcript. Ctrl-C stops the server
  (it drains: runs in flight are stored, resumable).

  The API:  curl -H "Authorization: Bearer \$KEY" http://$listen/v1/sessions
            curl http://$listen/v1/openapi.json   (docs/serve.md)

  Another key for this server (it takes it within a second, no restart):
    $kernel keys create NAME --scopes run,read --keys $keys
  (\`kernel keys create --help\` lists the scopes; \`keys list\` and \`keys revoke\`
  take the same --keys)

MSG
wait $pid
