//go:build !unix

package wasm

import (
	"errors"
	"os"
)

func mapMemory(uint64) ([]byte, error) {
	return nil, errors.New("no anonymous mappings on this platform")
}

func unmapMemory([]byte) {}

func populateMemory([]byte) {}

func mapFile(*os.File, int64) ([]byte, error) { return nil, errors.New("no mappings on this platform") }

func physicalMemoryMB() int { return 0 }
