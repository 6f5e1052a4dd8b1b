#!/bin/sh
# gobuild.sh OUT WHAT [GO BUILD FLAGS AND PACKAGE...]
#
# The Makefile's one way to build a Go binary: `go build -o OUT ...`, run
# every time, because go build is what knows a binary's inputs (every
# package it imports, their embedded files, go.mod and go.sum, the flags)
# and does nothing when none changed. A hand-written list of sources in the
# Makefile goes stale; this cannot.
#
# go build touches OUT even when it is up to date. When OUT's bytes did not
# change (its sha256; the build ID, the hash of everything that made it, is
# in them), its modification time is put back, so make does not redo what depends on OUT (the launcher's pin in
# bin/kernel, bin/plugins/git.sha256, the precompiled WASM modules). Prints
# one line, "  build     OUT (WHAT)", when OUT was built or changed.
#
# A no-op go build still reads and hashes every source file OUT imports
# (1-2 s of CPU for the kernel). In a git checkout whose tree is clean (no
# tracked file changed, no untracked file) it is skipped when OUT was built
# from the same commit by the same Go, environment and flags, and has not
# changed since: OUT's fingerprint of those is kept in bin/.gobuild. Any
# change to the tree, a commit, another Go or other flags go to go build.
# Why: RATIONALE.md, "`go build` decides what the Makefile rebuilds".
set -eu
out=$1 what=$2
shift 2
go=${GO:-go}

fp= fpfile=
if head=$(git rev-parse -q --verify HEAD 2>/dev/null) && [ -z "$(git status --porcelain 2>/dev/null || echo dirty)" ]; then
	fpfile=bin/.gobuild/$(printf '%s' "$out" | tr '/' '_').fp
	fp=$({ echo "$head"; "$go" env GOVERSION GOROOT GOOS GOARCH GOFLAGS GOEXPERIMENT GOAMD64 GOARM64 CGO_ENABLED CC CGO_CFLAGS CGO_LDFLAGS GOMODCACHE; printf '%s\n' "$out" "$@"; } | { sha256sum 2>/dev/null || shasum -a 256; } | cut -d' ' -f1)
	if [ -f "$out" ] && [ -f "$fpfile" ] && [ "$(cat "$fpfile")" = "$fp" ] && [ -z "$(find "$out" -newer "$fpfile")" ]; then
		exit 0
	fi
fi
remember() {
	if [ -n "$fp" ]; then
		mkdir -p "$(dirname "$fpfile")"
		printf '%s\n' "$fp" > "$fpfile"
	fi
}

# sha256, not `go tool buildid`: Go ships that tool unbuilt, and its first
# use in an empty build cache compiles it (16-18 s of CPU on a fresh clone).
sum() { { sha256sum "$1" 2>/dev/null || shasum -a 256 "$1"; } | cut -d' ' -f1; }
before=
if [ -f "$out" ]; then
	before=$(sum "$out" || true)
	touch -r "$out" "$out.mtime"
fi
if ! "$go" build -o "$out" "$@"; then
	rm -f "$out.mtime"
	[ -z "$fpfile" ] || rm -f "$fpfile"
	exit 1
fi
if [ -n "$before" ] && [ "$before" = "$(sum "$out" || true)" ]; then
	touch -r "$out.mtime" "$out"
	rm -f "$out.mtime"
	remember
	exit 0
fi
rm -f "$out.mtime"
remember
printf '  %-9s %s\n' build "$out ($what)"
