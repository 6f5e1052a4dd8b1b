package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/kernel"
)

// callReactor serves a call with a fresh, initialised reactor instance
// (from the pool when one is ready) and discards the instance afterwards.
//
// The reactor ABI: the host calls agentkernel_alloc(len) for room in guest
// memory, writes the request ({"tool","args"}, as for the json ABI) there,
// and calls agentkernel_call(ptr, len). The result is (ptr<<32 | len) of a
// {"content","is_error"} object (or plain text) in guest memory.
//
// Waiting for an instance (the budget, and instantiating one when the pool
// has none ready, bounded by the module's timeout of its own) is the
// host's time; the call's timeout starts once it has one.
func (t *tool) callReactor(q *queued, args json.RawMessage) (kernel.Result, error) {
	ctx := q.ctx
	req, err := t.request(args)
	if err != nil {
		return kernel.Result{}, err
	}
	probe, err := t.m.health.admit()
	if err != nil {
		return kernel.Result{Content: err.Error(), IsError: true}, t.fail("unavailable", err)
	}
	var in *instance
	if !probe {
		in = t.m.pool.take()
	}
	if in == nil {
		// A pooled instance holds its whole share of the budget
		// already; one made on demand waits for it.
		ch, err := t.m.reserve(ctx)
		if err != nil {
			return kernel.Result{Content: err.Error(), IsError: true}, t.wrap(err)
		}
		if in, err = t.m.newReactorInstance(ctx, ch); err != nil {
			// The caller giving up is not the module's fault; an
			// initialisation that outlasts the call's deadline is.
			if probe || !errors.Is(ctx.Err(), context.Canceled) {
				t.m.health.failure(err)
			}
			return kernel.Result{Content: err.Error(), IsError: true}, t.wrap(err)
		}
		if t.m.health.success() {
			t.m.pool.wakeUp()
		}
	}
	defer t.m.pool.discard(in)
	ctx, cancel := q.begin()
	in.io.attach(ctx, cancel)

	out, err := reactorRoundTrip(ctx, in, req)
	in.overflowed = stackOverflow(err)
	var ge *guestError
	if err != nil && !errors.As(err, &ge) {
		err = describeExit(ctx, err, in.io, "call")
	} else if err == nil {
		err = describeExit(ctx, nil, in.io, "call")
	}
	if err != nil {
		return kernel.Result{Content: err.Error(), IsError: true}, t.wrap(err)
	}
	return parseResult(out), nil
}

// reactorRoundTrip passes req to the instance and copies its response out.
func reactorRoundTrip(ctx context.Context, in *instance, req []byte) ([]byte, error) {
	mem := in.mod.Memory()
	res, err := in.alloc.Call(ctx, uint64(len(req)))
	if err != nil {
		return nil, err
	}
	ptr := uint32(res[0])
	if !mem.Write(ptr, req) {
		return nil, &guestError{code: "abi", msg: fmt.Sprintf("%s returned %d, which has no room for %d bytes in a %d-byte memory", exportAlloc, ptr, len(req), mem.Size()), stderr: in.io.stderrSummary()}
	}
	res, err = in.call.Call(ctx, uint64(ptr), uint64(len(req)))
	if err != nil {
		return nil, err
	}
	rptr, rlen := uint32(res[0]>>32), uint32(res[0])
	if int(rlen) > in.io.maxOutput {
		return nil, &guestError{code: "output_limit", msg: fmt.Sprintf("the result is %d bytes, over max_output_bytes (%d)", rlen, in.io.maxOutput), err: ErrOutputLimit}
	}
	out, ok := mem.Read(rptr, rlen)
	if !ok {
		return nil, &guestError{code: "abi", msg: fmt.Sprintf("%s returned %d bytes at %d, outside the %d-byte memory", exportCall, rlen, rptr, mem.Size())}
	}
	return append([]byte(nil), out...), nil
}
