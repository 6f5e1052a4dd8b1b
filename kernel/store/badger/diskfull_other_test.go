//go:build unix && !linux

package badger

import "errors"

func helperDiskFull(dir, minFree string) error {
	return errors.New("the disk-full test needs Linux (tmpfs, fallocate)")
}
