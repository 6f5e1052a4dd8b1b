// Package treetest holds tests of the source tree as a whole. Those that
// build or edit run on a scratch copy, so the checkout is never touched:
// that `make build` and `make plugins` cannot leave a stale binary behind
// (the Makefile lets go build decide), and that the worked example of
// docs/architecture.md, "Adding a field policy and hooks can see", takes
// exactly the files it says. TestPackageMapListsEveryPackage reads the
// checkout: docs/architecture.md's package map names every package. It
// has no code of its own.
package treetest
