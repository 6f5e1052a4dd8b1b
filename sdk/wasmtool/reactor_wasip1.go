//go:build wasip1

package wasmtool

import "unsafe"

// The reactor ABI. The host calls agentkernel_alloc for room for the
// request, writes the request there and calls agentkernel_call, which
// returns where the result is: (pointer << 32) | length. Both buffers stay
// referenced here, so the garbage collector keeps them until the host has
// read the result; an instance serves one call and is then discarded.
var request, response []byte

//go:wasmexport agentkernel_alloc
func agentkernelAlloc(size uint32) uint32 {
	request = make([]byte, max(size, 1))
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(request))))
}

//go:wasmexport agentkernel_call
func agentkernelCall(ptr, size uint32) uint64 {
	if request == nil || ptr != uint32(uintptr(unsafe.Pointer(unsafe.SliceData(request)))) || int(size) > len(request) {
		response = []byte(`{"content":"sdk: agentkernel_call without a matching agentkernel_alloc","is_error":true}`)
	} else {
		response = Serve(request[:size])
	}
	if len(response) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(response))))<<32 | uint64(len(response))
}

// agentkernel_warm is optional in the ABI: the host calls it after
// _initialize, before the instance waits in the pool for its call.
//
//go:wasmexport agentkernel_warm
func agentkernelWarm() {
	warm()
}
