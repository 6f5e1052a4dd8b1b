#!/bin/sh
# gobuild.sh OUT WHAT [GO BUILD FLAGS AND PACKAGE...]
#
# The Makefile's one way to build a Go binary: `go build -o OUT ...`, run
# every time, because go build is what knows a binary's inputs (every
# package it imports, their embedded files, go.mod and go.sum, the flags)
# and does nothing when none changed. A hand-written list of sources in the
# Makefile goes stale; this cannot.
#
# go build touches OUT even when it is up to date. When OUT's build ID (the
# hash of everything that made it) did not change, its modification time is
# put back, so make does not redo what depends on OUT (the launcher's pin in
# bin/kernel, bin/plugins/git.sha256, the precompiled WASM modules). Prints
# one line, "  build     OUT (WHAT)", when OUT was built or changed.
# Why: RATIONALE.md, "`go build` decides what the Makefile rebuilds".
set -eu
out=$1 what=$2
shift 2
go=${GO:-go}
before=
if [ -f "$out" ]; then
	before=$("$go" tool buildid "$out" 2>/dev/null || true)
	touch -r "$out" "$out.mtime"
fi
if ! "$go" build -o "$out" "$@"; then
	rm -f "$out.mtime"
	exit 1
fi
if [ -n "$before" ] && [ "$before" = "$("$go" tool buildid "$out" 2>/dev/null || true)" ]; then
	touch -r "$out.mtime" "$out"
	rm -f "$out.mtime"
	exit 0
fi
rm -f "$out.mtime"
printf '  %-9s %s\n' build "$out ($what)"
