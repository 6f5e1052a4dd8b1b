//go:build !race

package wasm

// raceEnabled: the race detector shadows memory the tests measure.
const raceEnabled = false
