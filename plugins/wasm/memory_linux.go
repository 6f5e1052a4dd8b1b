package wasm

import (
	"syscall"
	"unsafe"
)

const mapNoReserve = syscall.MAP_NORESERVE

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14).
const madvPopulateWrite = 23

// populateMemory asks the kernel to fault b's pages in for writing without
// changing them. Older kernels refuse the advice; that is fine.
func populateMemory(b []byte) {
	if len(b) > 0 {
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), madvPopulateWrite)
	}
}

// physicalMemoryMB is the machine's RAM in MiB, or 0 if unknown.
func physicalMemoryMB() int {
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil {
		return 0
	}
	return int(uint64(si.Totalram) * uint64(si.Unit) >> 20)
}
