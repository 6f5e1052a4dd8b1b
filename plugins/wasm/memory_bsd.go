//go:build unix && !linux

package wasm

const mapNoReserve = 0

func populateMemory([]byte) {}

func physicalMemoryMB() int { return 0 }
