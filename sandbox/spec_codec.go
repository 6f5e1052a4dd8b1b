package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The spec travels to the launcher in a small binary form of its own,
// not JSON: the launcher is a new process at every cold start, and
// encoding/json's first decode there (its reflection caches built, its
// code paged in) was about a quarter of a millisecond of each start
// (RATIONALE.md, "The sandbox's cold start, second round (issue 45)").
// Field by field, in the order below; TestSpecCodecRoundTrip fails when a
// field of spec is added and not carried. Bump launcherProto when the
// form changes.

// spec flag bits.
const (
	specProbe = 1 << iota
	specPrestarted
	specMountNS
	specFSView
	specSeccomp
	specRoot
	specCgroupPIDs
	specCgroupMemory
)

// rule flag bits.
const (
	ruleRW = 1 << iota
	ruleDir
)

// encode is the spec as the launcher reads it (decodeSpec).
func (sp *spec) encode() []byte {
	var b []byte
	var flags byte
	for i, on := range []bool{sp.Probe, sp.Prestarted, sp.MountNS, sp.FSView, sp.Seccomp, sp.Root, sp.CgroupPIDs, sp.CgroupMemory} {
		if on {
			flags |= 1 << i
		}
	}
	b = append(b, flags)
	for _, s := range []string{sp.HostPATH, sp.PIDsCgroup, sp.MemoryCgroup, sp.Cgroup} {
		b = appendString(b, s)
	}
	for _, n := range []int64{int64(sp.LandlockABI), int64(sp.MemoryMB), int64(sp.CPUSeconds), int64(sp.MaxProcs), int64(sp.MaxFileMB), int64(sp.MaxOpenFiles), sp.TimeoutNS} {
		b = binary.AppendVarint(b, n)
	}
	b = appendStrings(b, sp.Argv)
	b = appendStrings(b, sp.BindRO)
	b = binary.AppendUvarint(b, uint64(len(sp.Rules)))
	for _, r := range sp.Rules {
		b = appendString(b, r.Path)
		var f byte
		if r.RW {
			f |= ruleRW
		}
		if r.Dir {
			f |= ruleDir
		}
		b = append(b, f)
	}
	if sp.Net == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	for _, ports := range [][]uint16{sp.Net.Connect, sp.Net.Bind} {
		b = binary.AppendUvarint(b, uint64(len(ports)))
		for _, p := range ports {
			b = binary.AppendUvarint(b, uint64(p))
		}
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = appendString(b, s)
	}
	return b
}

// errSpecShort is a spec that ends inside a field.
var errSpecShort = errors.New("the spec ends early")

// specReader reads what encode wrote; the first error sticks.
type specReader struct {
	b   []byte
	err error
}

func (r *specReader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.fail(errSpecShort)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *specReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

func (r *specReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errSpecShort)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *specReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(errSpecShort)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a length that cannot exceed what is left.
func (r *specReader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail(errSpecShort)
		return 0
	}
	return int(n)
}

func (r *specReader) string() string {
	n := r.count()
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *specReader) strings() []string {
	n := r.count()
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	for range n {
		out = append(out, r.string())
	}
	return out
}

func (r *specReader) ports() []uint16 {
	n := r.count()
	if n == 0 {
		return nil
	}
	out := make([]uint16, 0, n)
	for range n {
		p := r.uvarint()
		if p > 0xffff {
			r.fail(fmt.Errorf("port %d out of range", p))
		}
		out = append(out, uint16(p))
	}
	return out
}

// decodeSpec reads a spec encode wrote; anything else is an error.
func decodeSpec(b []byte) (spec, error) {
	r := &specReader{b: b}
	var sp spec
	flags := r.byte()
	sp.Probe, sp.Prestarted = flags&specProbe != 0, flags&specPrestarted != 0
	sp.MountNS, sp.FSView, sp.Seccomp = flags&specMountNS != 0, flags&specFSView != 0, flags&specSeccomp != 0
	sp.Root, sp.CgroupPIDs, sp.CgroupMemory = flags&specRoot != 0, flags&specCgroupPIDs != 0, flags&specCgroupMemory != 0
	sp.HostPATH, sp.PIDsCgroup, sp.MemoryCgroup, sp.Cgroup = r.string(), r.string(), r.string(), r.string()
	sp.LandlockABI, sp.MemoryMB, sp.CPUSeconds = int(r.varint()), int(r.varint()), int(r.varint())
	sp.MaxProcs, sp.MaxFileMB, sp.MaxOpenFiles = int(r.varint()), int(r.varint()), int(r.varint())
	sp.TimeoutNS = r.varint()
	sp.Argv = r.strings()
	sp.BindRO = r.strings()
	if n := r.count(); n > 0 {
		sp.Rules = make([]specRule, 0, n)
		for range n {
			p := r.string()
			f := r.byte()
			sp.Rules = append(sp.Rules, specRule{Path: p, RW: f&ruleRW != 0, Dir: f&ruleDir != 0})
		}
	}
	switch r.byte() {
	case 0:
	case 1:
		sp.Net = &Net{Connect: r.ports(), Bind: r.ports()}
	default:
		r.fail(errors.New("bad net marker"))
	}
	if r.err == nil && len(r.b) > 0 {
		r.fail(fmt.Errorf("%d bytes after the spec", len(r.b)))
	}
	if r.err != nil {
		return spec{}, r.err
	}
	return sp, nil
}
