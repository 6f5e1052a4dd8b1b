package wasm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// This file reads just enough of the WebAssembly binary format to refuse a
// module before compiling it (unknown imports, threads, signatures that do
// not match WASI, missing entry points); instrument.go uses it to add
// deadline checks to function entries.

// Section ids of the binary format.
const (
	secCustom   = 0
	secType     = 1
	secImport   = 2
	secFunction = 3
	secMemory   = 5
	secExport   = 7
	secCode     = 10
)

// Extern kinds of imports and exports.
const (
	externFunc   = 0
	externTable  = 1
	externMemory = 2
	externGlobal = 3
	externTag    = 4
)

var wasmMagic = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}

// funcType is a function signature as value-type bytes (0x7f i32, 0x7e
// i64, 0x7d f32, 0x7c f64, 0x7b v128, 0x70 funcref, 0x6f externref).
type funcType struct {
	params, results []byte
}

func (t funcType) String() string {
	return "(" + valTypeNames(t.params) + ") -> (" + valTypeNames(t.results) + ")"
}

func valTypeNames(ts []byte) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		switch t {
		case 0x7f:
			names[i] = "i32"
		case 0x7e:
			names[i] = "i64"
		case 0x7d:
			names[i] = "f32"
		case 0x7c:
			names[i] = "f64"
		case 0x7b:
			names[i] = "v128"
		case 0x70:
			names[i] = "funcref"
		case 0x6f:
			names[i] = "externref"
		default:
			names[i] = fmt.Sprintf("0x%02x", t)
		}
	}
	return strings.Join(names, ", ")
}

type wasmImport struct {
	module, name string
	kind         byte
	typeIndex    uint32 // functions
	shared       bool   // memories
}

type wasmExport struct {
	kind  byte
	index uint32
}

// wasmInfo is what the host needs to know about a module before compiling it.
type wasmInfo struct {
	types     []funcType
	imports   []wasmImport
	funcTypes []uint32 // type index of each defined function
	exports   map[string]wasmExport
	shared    bool   // a defined memory is shared (threads)
	minPages  uint32 // the largest initial size of a memory, in 64 KiB pages

	codeStart, codeEnd int // the code section's content, if any
	bodies             int // number of function bodies
}

// importedFuncs is the number of imported functions, which come first in
// the function index space.
func (w *wasmInfo) importedFuncs() int {
	n := 0
	for _, im := range w.imports {
		if im.kind == externFunc {
			n++
		}
	}
	return n
}

// exportedFunc returns the signature of the exported function name.
func (w *wasmInfo) exportedFunc(name string) (funcType, bool) {
	e, ok := w.exports[name]
	if !ok || e.kind != externFunc {
		return funcType{}, false
	}
	idx := int(e.index)
	var ti uint32
	if n := w.importedFuncs(); idx < n {
		i := 0
		for _, im := range w.imports {
			if im.kind != externFunc {
				continue
			}
			if i == idx {
				ti = im.typeIndex
				break
			}
			i++
		}
	} else if idx-n < len(w.funcTypes) {
		ti = w.funcTypes[idx-n]
	} else {
		return funcType{}, false
	}
	if int(ti) >= len(w.types) {
		return funcType{}, false
	}
	return w.types[ti], true
}

// errMalformed marks a binary that is not valid WebAssembly.
var errMalformed = errors.New("malformed WebAssembly binary")

type reader struct {
	b   []byte
	off int
}

func (r *reader) fail(what string) error {
	return fmt.Errorf("%w: %s at byte %d", errMalformed, what, r.off)
}

func (r *reader) byte() (byte, error) {
	if r.off >= len(r.b) {
		return 0, r.fail("unexpected end")
	}
	c := r.b[r.off]
	r.off++
	return c, nil
}

func (r *reader) u32() (uint32, error) {
	v, err := r.uleb(32)
	return uint32(v), err
}

func (r *reader) uleb(bits uint) (uint64, error) {
	var v uint64
	var shift uint
	for {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		if shift >= bits {
			return 0, r.fail("integer too large")
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, nil
		}
		shift += 7
	}
}

// blockType skips a block type: empty, a value type or a type index.
func (r *reader) blockType() error {
	c, err := r.byte()
	if err != nil {
		return err
	}
	switch c {
	case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f, 0x69:
		return nil
	}
	r.off--
	return r.sleb33()
}

// sleb33 skips a signed LEB128 of at most 33 bits (heap types, type indexes).
func (r *reader) sleb33() error { return r.sleb(5) }

// sleb skips a signed LEB128 of at most maxBytes bytes.
func (r *reader) sleb(maxBytes int) error {
	for i := 0; i < maxBytes; i++ {
		c, err := r.byte()
		if err != nil {
			return err
		}
		if c&0x80 == 0 {
			return nil
		}
	}
	return r.fail("integer too large")
}

func (r *reader) bytes(n uint32) ([]byte, error) {
	if uint64(r.off)+uint64(n) > uint64(len(r.b)) {
		return nil, r.fail("unexpected end")
	}
	s := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return s, nil
}

func (r *reader) name() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	s, err := r.bytes(n)
	return string(s), err
}

// valType reads one value type. Reference types of the GC proposal
// (0x63/0x64 with a heap type) are read but reported as unsupported.
func (r *reader) valType() (byte, error) {
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	switch c {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f, 0x69:
		return c, nil
	case 0x63, 0x64:
		if err := r.sleb33(); err != nil {
			return 0, err
		}
		return c, nil
	}
	r.off--
	return 0, r.fail(fmt.Sprintf("unknown value type 0x%02x", c))
}

// limits reads memory or table limits: the minimum and whether they are
// shared.
func (r *reader) limits() (minimum uint64, shared bool, err error) {
	flags, err := r.byte()
	if err != nil {
		return 0, false, err
	}
	if flags > 0x07 {
		return 0, false, r.fail(fmt.Sprintf("unknown limits flags 0x%02x", flags))
	}
	bits := uint(32)
	if flags&0x04 != 0 {
		bits = 64
	}
	if minimum, err = r.uleb(bits); err != nil {
		return 0, false, err
	}
	if flags&0x01 != 0 {
		if _, err := r.uleb(bits); err != nil {
			return 0, false, err
		}
	}
	return minimum, flags&0x02 != 0, nil
}

// parseWasm reads the sections the host checks. It does not validate the
// module: wazero does that when compiling.
func parseWasm(b []byte) (*wasmInfo, error) {
	if len(b) < len(wasmMagic) || !bytes.Equal(b[:4], wasmMagic[:4]) {
		return nil, fmt.Errorf("%w: no \\0asm magic (is this a .wasm file?)", errMalformed)
	}
	if !bytes.Equal(b[4:8], wasmMagic[4:]) {
		return nil, fmt.Errorf("%w: binary version %d is not 1 (components are not supported; build a WASI preview1 core module)", errMalformed, binary.LittleEndian.Uint32(b[4:8]))
	}
	w := &wasmInfo{exports: map[string]wasmExport{}}
	r := &reader{b: b, off: 8}
	for r.off < len(b) {
		id, err := r.byte()
		if err != nil {
			return nil, err
		}
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		content, err := r.bytes(size)
		if err != nil {
			return nil, err
		}
		start := r.off - len(content)
		sr := &reader{b: b[:start+len(content)], off: start}
		switch id {
		case secType:
			err = w.readTypes(sr)
		case secImport:
			err = w.readImports(sr)
		case secFunction:
			err = w.readFunctions(sr)
		case secMemory:
			err = w.readMemories(sr)
		case secExport:
			err = w.readExports(sr)
		case secCode:
			w.codeStart, w.codeEnd = start, start+len(content)
			var n uint32
			n, err = sr.u32()
			w.bodies = int(n)
		}
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", id, err)
		}
	}
	return w, nil
}

func (w *wasmInfo) readTypes(r *reader) error {
	n, err := r.u32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		form, err := r.byte()
		if err != nil {
			return err
		}
		if form != 0x60 {
			return r.fail(fmt.Sprintf("type %d is not a function type (form 0x%02x; the GC proposal is not supported)", i, form))
		}
		var t funcType
		for _, dst := range []*[]byte{&t.params, &t.results} {
			m, err := r.u32()
			if err != nil {
				return err
			}
			for j := uint32(0); j < m; j++ {
				v, err := r.valType()
				if err != nil {
					return err
				}
				*dst = append(*dst, v)
			}
		}
		w.types = append(w.types, t)
	}
	return nil
}

func (w *wasmInfo) readImports(r *reader) error {
	n, err := r.u32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		var im wasmImport
		if im.module, err = r.name(); err != nil {
			return err
		}
		if im.name, err = r.name(); err != nil {
			return err
		}
		if im.kind, err = r.byte(); err != nil {
			return err
		}
		switch im.kind {
		case externFunc:
			im.typeIndex, err = r.u32()
		case externTable:
			if _, err = r.valType(); err == nil {
				_, _, err = r.limits()
			}
		case externMemory:
			_, im.shared, err = r.limits()
		case externGlobal:
			if _, err = r.valType(); err == nil {
				_, err = r.byte()
			}
		case externTag:
			if _, err = r.byte(); err == nil {
				_, err = r.u32()
			}
		default:
			return r.fail(fmt.Sprintf("unknown import kind 0x%02x", im.kind))
		}
		if err != nil {
			return err
		}
		w.imports = append(w.imports, im)
	}
	return nil
}

func (w *wasmInfo) readFunctions(r *reader) error {
	n, err := r.u32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		t, err := r.u32()
		if err != nil {
			return err
		}
		w.funcTypes = append(w.funcTypes, t)
	}
	return nil
}

func (w *wasmInfo) readMemories(r *reader) error {
	n, err := r.u32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		minimum, shared, err := r.limits()
		if err != nil {
			return err
		}
		w.shared = w.shared || shared
		w.minPages = max(w.minPages, uint32(min(minimum, 1<<32-1)))
	}
	return nil
}

func (w *wasmInfo) readExports(r *reader) error {
	n, err := r.u32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		name, err := r.name()
		if err != nil {
			return err
		}
		kind, err := r.byte()
		if err != nil {
			return err
		}
		idx, err := r.u32()
		if err != nil {
			return err
		}
		w.exports[name] = wasmExport{kind: kind, index: idx}
	}
	return nil
}
