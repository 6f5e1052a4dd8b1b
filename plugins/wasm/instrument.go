package wasm

import (
	"bytes"
	"fmt"
	"strings"
)

// Instrumentation. With WithCloseOnContextDone, wazero's compiled code
// checks whether the instance was closed (deadline, cancellation) at loop
// headers only, so a loop-free recursion would never notice its deadline.
// instrument inserts an empty loop at the entry of the functions that need
// one, which turns each of their calls into a check point.

// entryCheck is an empty loop: wazero checks for a closed module (deadline,
// cancellation) at every loop header, so an empty loop at a function's
// entry makes every call a check point.
var entryCheck = []byte{0x03, 0x40, 0x0b} // loop (blocktype empty) end

// needsEntryCheck reports whether a function body (its expression) must get
// an entry check. The argument that the deadline is then always honoured: an
// endless run either iterates a loop forever (checked at the loop header) or
// executes endlessly many calls. Without iterating a loop one invocation
// executes a bounded number of calls, so endlessly many calls come from
// endlessly many invocations of functions that contain a call; each of those
// passes a check before its first call, either at the loop header that its
// straight-line prologue reaches (the shape of every Go function that calls
// another) or at the inserted entry check. Bodies without a call are bounded
// leaves and stay as they are. A body the decoder does not understand is
// instrumented: the mistake can only cost speed.
func needsEntryCheck(expr []byte) bool {
	if reachesLoopFirst(expr) {
		return false
	}
	calls, err := containsCall(expr)
	return calls || err != nil
}

// containsCall decodes the instructions of expr and reports whether any is
// a call (call, call_indirect, return_call, return_call_indirect, call_ref,
// return_call_ref).
func containsCall(expr []byte) (bool, error) {
	r := &reader{b: expr}
	for r.off < len(expr) {
		op, _ := r.byte()
		var err error
		switch {
		case op >= 0x10 && op <= 0x15:
			return true, nil
		case op == 0x02 || op == 0x03 || op == 0x04 || op == 0x06: // block loop if try
			err = r.blockType()
		case op == 0x07 || op == 0x08 || op == 0x09 || op == 0x0c || op == 0x0d || op == 0x18 ||
			(op >= 0x20 && op <= 0x26) || op == 0x3f || op == 0x40 || op == 0xd2 || op == 0xd4 || op == 0xd6:
			_, err = r.u32()
		case op == 0x0e: // br_table
			var n uint32
			if n, err = r.u32(); err == nil {
				for i := uint32(0); i <= n && err == nil; i++ {
					_, err = r.u32()
				}
			}
		case op == 0x1c: // select t*
			var n uint32
			if n, err = r.u32(); err == nil {
				for i := uint32(0); i < n && err == nil; i++ {
					_, err = r.valType()
				}
			}
		case op == 0x1f: // try_table
			err = r.tryTable()
		case op >= 0x28 && op <= 0x3e:
			err = r.memArg()
		case op == 0x41:
			err = r.sleb(5)
		case op == 0x42:
			err = r.sleb(10)
		case op == 0x43:
			_, err = r.bytes(4)
		case op == 0x44:
			_, err = r.bytes(8)
		case op == 0xd0: // ref.null heaptype
			err = r.sleb33()
		case op == 0xfc:
			err = r.prefixFC()
		case op == 0xfd:
			err = r.prefixFD()
		case op == 0xfe:
			err = r.prefixFE()
		case op <= 0x01 || op == 0x05 || op == 0x0a || op == 0x0b || op == 0x0f || op == 0x19 ||
			op == 0x1a || op == 0x1b || (op >= 0x45 && op <= 0xc4) || op == 0xd1 || op == 0xd3 || op == 0xd5:
			// no immediates
		default:
			return false, r.fail(fmt.Sprintf("opcode 0x%02x is not decoded", op))
		}
		if err != nil {
			return false, err
		}
	}
	return false, nil
}

func (r *reader) memArg() error {
	align, err := r.u32()
	if err != nil {
		return err
	}
	if align&0x40 != 0 { // multi-memory: a memory index follows
		if _, err := r.u32(); err != nil {
			return err
		}
	}
	_, err = r.uleb(64)
	return err
}

func (r *reader) tryTable() error {
	if err := r.blockType(); err != nil {
		return err
	}
	n, err := r.u32()
	for i := uint32(0); i < n && err == nil; i++ {
		var kind byte
		if kind, err = r.byte(); err != nil {
			break
		}
		if kind <= 1 { // catch, catch_ref: tag then label
			if _, err = r.u32(); err != nil {
				break
			}
		}
		_, err = r.u32()
	}
	return err
}

func (r *reader) prefixFC() error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	switch {
	case sub <= 7: // trunc_sat
		return nil
	case sub == 8 || sub == 10 || sub == 12 || sub == 14: // memory.init, memory.copy, table.init, table.copy
		if _, err := r.u32(); err != nil {
			return err
		}
		_, err = r.u32()
		return err
	case sub <= 17:
		_, err = r.u32()
		return err
	}
	return r.fail(fmt.Sprintf("opcode 0xfc %d is not decoded", sub))
}

func (r *reader) prefixFD() error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	switch {
	case sub <= 11 || sub == 92 || sub == 93: // loads and stores
		return r.memArg()
	case sub == 12 || sub == 13: // v128.const, i8x16.shuffle
		_, err = r.bytes(16)
		return err
	case sub >= 21 && sub <= 34: // extract and replace lane
		_, err = r.byte()
		return err
	case sub >= 84 && sub <= 91: // load and store lane
		if err := r.memArg(); err != nil {
			return err
		}
		_, err = r.byte()
		return err
	case sub <= 275:
		return nil
	}
	return r.fail(fmt.Sprintf("opcode 0xfd %d is not decoded", sub))
}

func (r *reader) prefixFE() error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	if sub == 0x03 { // atomic.fence
		_, err = r.byte()
		return err
	}
	return r.memArg()
}

// reachesLoopFirst reports whether expr starts with straight-line
// instructions (nop, block, local and global access, constants) followed by
// a loop, so every execution passes that loop's header before doing
// anything else.
func reachesLoopFirst(expr []byte) bool {
	r := &reader{b: expr}
	for r.off < len(expr) {
		op, _ := r.byte()
		var err error
		switch op {
		case 0x03: // loop
			return true
		case 0x01: // nop
		case 0x02: // block blocktype
			err = r.blockType()
		case 0x20, 0x21, 0x22, 0x23, 0x24: // local.get/set/tee, global.get/set
			_, err = r.u32()
		case 0x41: // i32.const
			err = r.sleb(5)
		case 0x42: // i64.const
			err = r.sleb(10)
		default:
			return false
		}
		if err != nil {
			return false
		}
	}
	return false
}

// instrument returns b with entryCheck inserted at the start of every
// function body that needsEntryCheck, and the number of bodies changed. When nothing changes it returns b itself. DWARF custom
// sections are dropped from a changed binary because their code offsets no
// longer hold.
func instrument(b []byte, w *wasmInfo) ([]byte, int, error) {
	if w.bodies == 0 {
		return b, 0, nil
	}
	r := &reader{b: b[:w.codeEnd], off: w.codeStart}
	if _, err := r.u32(); err != nil {
		return nil, 0, err
	}
	type body struct {
		start, end int // the body's bytes after its size
		insertAt   int // where the expression starts; -1: unchanged
	}
	bodies := make([]body, 0, w.bodies)
	changed := 0
	for i := 0; i < w.bodies; i++ {
		size, err := r.u32()
		if err != nil {
			return nil, 0, err
		}
		start := r.off
		if _, err := r.bytes(size); err != nil {
			return nil, 0, err
		}
		br := &reader{b: b[:start+int(size)], off: start}
		groups, err := br.u32()
		if err != nil {
			return nil, 0, fmt.Errorf("function body %d: %w", i, err)
		}
		for g := uint32(0); g < groups; g++ {
			if _, err := br.u32(); err != nil {
				return nil, 0, fmt.Errorf("function body %d: %w", i, err)
			}
			if _, err := br.valType(); err != nil {
				return nil, 0, fmt.Errorf("function body %d: %w", i, err)
			}
		}
		bd := body{start: start, end: start + int(size), insertAt: -1}
		if br.off >= bd.end {
			return nil, 0, fmt.Errorf("function body %d: %w", i, br.fail("empty expression"))
		}
		if needsEntryCheck(b[br.off:bd.end]) {
			bd.insertAt = br.off
			changed++
		}
		bodies = append(bodies, bd)
	}
	if r.off != w.codeEnd {
		return nil, 0, fmt.Errorf("code section: %w", r.fail("trailing bytes"))
	}
	if changed == 0 {
		return b, 0, nil
	}

	var code bytes.Buffer
	code.Grow(w.codeEnd - w.codeStart + changed*(len(entryCheck)+1))
	code.Write(appendULEB(nil, uint64(w.bodies)))
	for _, bd := range bodies {
		size := bd.end - bd.start
		if bd.insertAt < 0 {
			code.Write(appendULEB(nil, uint64(size)))
			code.Write(b[bd.start:bd.end])
			continue
		}
		code.Write(appendULEB(nil, uint64(size+len(entryCheck))))
		code.Write(b[bd.start:bd.insertAt])
		code.Write(entryCheck)
		code.Write(b[bd.insertAt:bd.end])
	}

	out := make([]byte, 0, len(b)+changed*(len(entryCheck)+1)+8)
	out = append(out, b[:8]...)
	sr := &reader{b: b, off: 8}
	for sr.off < len(b) {
		secStart := sr.off
		id, _ := sr.byte()
		size, _ := sr.u32()
		contentStart := sr.off
		sr.off += int(size)
		switch {
		case id == secCode:
			out = append(out, secCode)
			out = appendULEB(out, uint64(code.Len()))
			out = append(out, code.Bytes()...)
		case id == secCustom && isDebugSection(b[contentStart:sr.off]):
			// dropped: offsets into the old code section
		default:
			out = append(out, b[secStart:sr.off]...)
		}
	}
	return out, changed, nil
}

func isDebugSection(content []byte) bool {
	r := &reader{b: content}
	name, err := r.name()
	return err == nil && strings.HasPrefix(name, ".debug_")
}

func appendULEB(b []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}
