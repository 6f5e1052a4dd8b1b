package wasm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// Snapshots (pre-initialised memory images, after Wizer). A Go reactor
// spends most of a fresh instance's start in wazero copying the Go linker's
// data segments (100,000 for the js tool) and in _initialize (the Go
// runtime and the packages' init). Snapshot runs _initialize and the
// optional warm-up once, at build time, and writes a module whose data is
// the initialised memory (a few segments over its non-zero ranges), whose
// globals start at their initialised values and which exports neither
// _initialize nor agentkernel_warm, so that the host instantiates it ready
// to serve its call. A custom section records what the image froze.

const (
	secGlobal  = 6
	secData    = 11
	secStart   = 8
	secDataCnt = 12
)

// snapshotSection names the custom section that marks a snapshot module.
const snapshotSection = "agentkernel.snapshot"

// snapshotVersion is the layout of snapshotMeta this host reads.
const snapshotVersion = 1

// snapshotMeta is what a snapshot froze, in its custom section (JSON).
type snapshotMeta struct {
	Version int `json:"version"`
	// Nanotime is the last monotonic clock reading the guest saw while it
	// initialised: an instance's clock starts after it, so that the time
	// the runtime recorded at init is never in the future.
	Nanotime int64 `json:"nanotime"`
	// Args are the arguments the guest read at init (os.Args).
	Args []string `json:"args"`
	// Source is the sha256 of the module the snapshot was made from.
	Source string `json:"source"`
}

// snapshotGap is the run of zero bytes that splits two data segments of a
// snapshot: shorter runs are copied, which costs less than a segment.
const snapshotGap = 4096

// Snapshot instantiates the reactor module bin (WASI preview1, nothing
// granted but its arguments args, a fake clock and random stream), runs its
// _initialize and agentkernel_warm, and returns a module that starts in the
// state they left. It refuses modules whose state it cannot capture:
// imported memories, tables or globals, a start section, passive data or a
// global of a type it cannot write.
func Snapshot(ctx context.Context, bin []byte, args []string) ([]byte, error) {
	info, err := parseWasm(bin)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrModule, err)
	}
	if m, err := readSnapshotMeta(bin); err != nil {
		return nil, err
	} else if m != nil {
		return nil, fmt.Errorf("%w: it is a snapshot already", ErrModule)
	}
	if err := checkExports(info, ABIReactor); err != nil {
		return nil, err
	}
	if _, ok := info.exportedFunc(exportInit); !ok {
		return nil, fmt.Errorf("%w: a snapshot needs a reactor with %s", ErrModule, exportInit)
	}
	for _, im := range info.imports {
		if im.kind != externFunc {
			return nil, fmt.Errorf("%w: it imports the %s %s.%s, whose state a snapshot cannot capture", ErrModule, externName(im.kind), im.module, im.name)
		}
	}
	secs, err := splitSections(bin)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrModule, err)
	}
	var globals []global
	for _, s := range secs {
		switch s.id {
		case secStart:
			return nil, fmt.Errorf("%w: it has a start function, which a snapshot would run twice", ErrModule)
		case secDataCnt:
			return nil, fmt.Errorf("%w: it has passive data segments (a data count section), which a snapshot cannot renumber", ErrModule)
		case secGlobal:
			if globals, err = readGlobals(s.content); err != nil {
				return nil, fmt.Errorf("%w: global section: %v", ErrModule, err)
			}
		}
	}

	// The probe: the module with every global exported, so that its
	// values can be read after _initialize.
	probe, err := rewrite(secs, map[byte][]byte{secExport: exportGlobals(secs, len(globals))}, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrModule, err)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return nil, fmt.Errorf("instantiate WASI: %w", err)
	}
	var out strings.Builder
	clock := &snapClock{}
	cfg := wazero.NewModuleConfig().WithName("").WithArgs(args...).
		WithStdout(&out).WithStderr(&out).
		WithNanotime(clock.read, 1).
		WithStartFunctions(exportInit)
	mod, err := rt.InstantiateWithConfig(ctx, probe, cfg)
	if err == nil {
		if warm := mod.ExportedFunction(exportWarm); warm != nil {
			_, err = warm.Call(ctx)
		}
	}
	if err != nil {
		var exit *sys.ExitError
		if errors.As(err, &exit) {
			err = fmt.Errorf("it exited with code %d", exit.ExitCode())
		}
		return nil, fmt.Errorf("%w: initialising it for the snapshot: %v\n%s", ErrModule, err, out.String())
	}
	values := make([]uint64, len(globals))
	for i := range globals {
		g := mod.ExportedGlobal(globalExport(i))
		if g == nil {
			return nil, fmt.Errorf("%w: global %d is not readable", ErrModule, i)
		}
		values[i] = g.Get()
	}
	mem := mod.Memory()
	if mem == nil {
		return nil, fmt.Errorf("%w: it has no memory", ErrModule)
	}
	image, ok := mem.Read(0, mem.Size())
	if !ok {
		return nil, fmt.Errorf("%w: its memory is not readable", ErrModule)
	}
	sum := sha256.Sum256(bin)
	meta, err := json.Marshal(snapshotMeta{Version: snapshotVersion, Nanotime: clock.last, Args: args, Source: hex.EncodeToString(sum[:])})
	if err != nil {
		return nil, err
	}
	memSec, err := growMemory(secs, mem.Size()/65536)
	if err != nil {
		return nil, fmt.Errorf("%w: memory section: %v", ErrModule, err)
	}
	gsec, err := writeGlobals(globals, values)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrModule, err)
	}
	custom := appendName(nil, snapshotSection)
	custom = append(custom, meta...)
	return rewrite(secs, map[byte][]byte{
		secGlobal: gsec,
		secExport: dropExports(secs, exportInit, exportWarm),
		secMemory: memSec,
		secData:   dataSegments(image),
	}, custom)
}

// snapClock is the clock an instance sees while the snapshot is made:
// wazero's fake (1 ms a reading, from 0), remembering its last reading.
type snapClock struct{ last int64 }

func (c *snapClock) read() int64 {
	c.last += 1e6
	return c.last
}

type wasmSection struct {
	id      byte
	content []byte
}

func splitSections(b []byte) ([]wasmSection, error) {
	var out []wasmSection
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
		out = append(out, wasmSection{id: id, content: content})
	}
	return out, nil
}

// rewrite reassembles a module from secs, with the contents of the
// sections in repl replaced (a section absent from secs is added where
// its id orders it) and a custom section appended when custom is not nil.
func rewrite(secs []wasmSection, repl map[byte][]byte, custom []byte) ([]byte, error) {
	var out bytes.Buffer
	out.Write(wasmMagic[:])
	put := func(id byte, c []byte) {
		out.WriteByte(id)
		out.Write(appendULEB(nil, uint64(len(c))))
		out.Write(c)
	}
	done := map[byte]bool{}
	for _, s := range secs {
		if c, ok := repl[s.id]; ok && s.id != secCustom {
			if done[s.id] {
				return nil, fmt.Errorf("section %d appears twice", s.id)
			}
			done[s.id] = true
			put(s.id, c)
			continue
		}
		put(s.id, s.content)
		if s.id == secCode {
			// the data section follows the code section: add it if absent
			if c, ok := repl[secData]; ok && !hasSection(secs, secData) {
				done[secData] = true
				put(secData, c)
			}
		}
	}
	for id := range repl {
		if !done[id] {
			return nil, fmt.Errorf("no section %d to replace", id)
		}
	}
	if custom != nil {
		put(secCustom, custom)
	}
	return out.Bytes(), nil
}

func hasSection(secs []wasmSection, id byte) bool {
	for _, s := range secs {
		if s.id == id {
			return true
		}
	}
	return false
}

func sectionContent(secs []wasmSection, id byte) []byte {
	for _, s := range secs {
		if s.id == id {
			return s.content
		}
	}
	return nil
}

func appendName(b []byte, s string) []byte {
	b = appendULEB(b, uint64(len(s)))
	return append(b, s...)
}

func globalExport(i int) string { return fmt.Sprintf("agentkernel.snapshot.global.%d", i) }

// exportEntry is one entry of the export section.
type exportEntry struct {
	name  string
	kind  byte
	index uint32
}

// readExportEntries reads the export section's entries.
func readExportEntries(c []byte) ([]exportEntry, error) {
	var out []exportEntry
	if c == nil {
		return nil, nil
	}
	r := &reader{b: c}
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	for i := uint32(0); i < n; i++ {
		name, err := r.name()
		if err != nil {
			return nil, err
		}
		kind, err := r.byte()
		if err != nil {
			return nil, err
		}
		idx, err := r.u32()
		if err != nil {
			return nil, err
		}
		out = append(out, exportEntry{name, kind, idx})
	}
	return out, nil
}

func writeExports(es []exportEntry) []byte {
	b := appendULEB(nil, uint64(len(es)))
	for _, e := range es {
		b = appendName(b, e.name)
		b = append(b, e.kind)
		b = appendULEB(b, uint64(e.index))
	}
	return b
}

// exportGlobals is the export section with the module's n defined
// globals exported too.
func exportGlobals(secs []wasmSection, n int) []byte {
	es, _ := readExportEntries(sectionContent(secs, secExport)) // parseWasm read it
	for i := 0; i < n; i++ {
		es = append(es, exportEntry{globalExport(i), externGlobal, uint32(i)})
	}
	return writeExports(es)
}

// dropExports is the export section without the named exports.
func dropExports(secs []wasmSection, names ...string) []byte {
	es, _ := readExportEntries(sectionContent(secs, secExport))
	kept := es[:0]
	for _, e := range es {
		drop := false
		for _, n := range names {
			drop = drop || e.name == n
		}
		if !drop {
			kept = append(kept, e)
		}
	}
	return writeExports(kept)
}

type global struct {
	typ, mut byte
}

// readGlobals reads the global section, accepting constant initialisers.
func readGlobals(c []byte) ([]global, error) {
	r := &reader{b: c}
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	out := make([]global, 0, n)
	for i := uint32(0); i < n; i++ {
		t, err := r.valType()
		if err != nil {
			return nil, err
		}
		mut, err := r.byte()
		if err != nil {
			return nil, err
		}
		switch t {
		case 0x7f, 0x7e, 0x7d, 0x7c:
		default:
			return nil, fmt.Errorf("global %d has type %s, which a snapshot cannot write", i, valTypeNames([]byte{t}))
		}
		// A constant expression: one instruction, then end.
		op, err := r.byte()
		if err != nil {
			return nil, err
		}
		switch op {
		case 0x41:
			err = r.sleb(5)
		case 0x42:
			err = r.sleb(10)
		case 0x43:
			_, err = r.bytes(4)
		case 0x44:
			_, err = r.bytes(8)
		case 0x23:
			_, err = r.u32()
		default:
			return nil, fmt.Errorf("global %d: initialiser opcode 0x%02x is not supported", i, op)
		}
		if err != nil {
			return nil, err
		}
		if end, err := r.byte(); err != nil || end != 0x0b {
			return nil, fmt.Errorf("global %d: initialiser is not one constant", i)
		}
		out = append(out, global{typ: t, mut: mut})
	}
	if r.off != len(c) {
		return nil, r.fail("trailing bytes")
	}
	return out, nil
}

// writeGlobals is a global section with each global starting at values[i]
// (its bits, as wazero's api.Global.Get returns them).
func writeGlobals(gs []global, values []uint64) ([]byte, error) {
	b := appendULEB(nil, uint64(len(gs)))
	for i, g := range gs {
		b = append(b, g.typ, g.mut)
		v := values[i]
		switch g.typ {
		case 0x7f:
			b = append(b, 0x41)
			b = appendSLEB(b, int64(int32(uint32(v))))
		case 0x7e:
			b = append(b, 0x42)
			b = appendSLEB(b, int64(v))
		case 0x7d:
			b = append(b, 0x43)
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(api.DecodeF32(v)))
		case 0x7c:
			b = append(b, 0x44)
			b = binary.LittleEndian.AppendUint64(b, v)
		default:
			return nil, fmt.Errorf("global %d: type %s", i, valTypeNames([]byte{g.typ}))
		}
		b = append(b, 0x0b)
	}
	return b, nil
}

func appendSLEB(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// growMemory is the memory section with the one memory's minimum raised to
// pages.
func growMemory(secs []wasmSection, pages uint32) ([]byte, error) {
	r := &reader{b: sectionContent(secs, secMemory)}
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	if n != 1 {
		return nil, fmt.Errorf("%d memories; a snapshot needs exactly one", n)
	}
	flags, err := r.byte()
	if err != nil {
		return nil, err
	}
	if flags&^0x01 != 0 {
		return nil, fmt.Errorf("memory flags 0x%02x (shared or 64-bit) are not supported", flags)
	}
	minimum, err := r.u32()
	if err != nil {
		return nil, err
	}
	b := append(appendULEB(nil, 1), flags)
	b = appendULEB(b, uint64(max(minimum, pages)))
	if flags&0x01 != 0 {
		maximum, err := r.u32()
		if err != nil {
			return nil, err
		}
		if pages > maximum {
			return nil, fmt.Errorf("memory grew to %d pages, past its maximum %d", pages, maximum)
		}
		b = appendULEB(b, uint64(maximum))
	}
	return b, nil
}

// dataSegments is a data section whose active segments for memory 0 hold
// image's non-zero ranges (split at runs of at least snapshotGap zeros).
func dataSegments(image []byte) []byte {
	var segs [][2]int
	i, n := 0, len(image)
	for i < n {
		for i < n && image[i] == 0 {
			i++
		}
		if i == n {
			break
		}
		start, zeros := i, 0
		end := i
		for i < n && zeros < snapshotGap {
			if image[i] == 0 {
				zeros++
			} else {
				zeros, end = 0, i+1
			}
			i++
		}
		segs = append(segs, [2]int{start, end})
		i = end
	}
	b := appendULEB(nil, uint64(len(segs)))
	for _, s := range segs {
		b = append(b, 0x00, 0x41)
		b = appendSLEB(b, int64(int32(uint32(s[0]))))
		b = append(b, 0x0b)
		b = appendULEB(b, uint64(s[1]-s[0]))
		b = append(b, image[s[0]:s[1]]...)
	}
	return b
}

// readSnapshotMeta returns the snapshot section's contents, nil for a
// module that is not a snapshot, or an error for a damaged one.
func readSnapshotMeta(b []byte) (*snapshotMeta, error) {
	secs, err := splitSections(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrModule, err)
	}
	var found *snapshotMeta
	for _, s := range secs {
		if s.id != secCustom {
			continue
		}
		r := &reader{b: s.content}
		name, err := r.name()
		if err != nil || name != snapshotSection {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("%w: two %s sections", ErrModule, snapshotSection)
		}
		var m snapshotMeta
		dec := json.NewDecoder(bytes.NewReader(s.content[r.off:]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("%w: custom section %s is damaged: %v", ErrModule, snapshotSection, err)
		}
		if m.Version != snapshotVersion {
			return nil, fmt.Errorf("%w: custom section %s has version %d; this host reads version %d (make the snapshot again)", ErrModule, snapshotSection, m.Version, snapshotVersion)
		}
		if m.Nanotime < 0 {
			return nil, fmt.Errorf("%w: custom section %s: nanotime %d is negative", ErrModule, snapshotSection, m.Nanotime)
		}
		if _, ok := exports(secs, exportInit); ok {
			return nil, fmt.Errorf("%w: custom section %s marks a snapshot, but the module still exports %s", ErrModule, snapshotSection, exportInit)
		}
		found = &m
	}
	return found, nil
}

// exports reports whether the export section of secs exports name.
func exports(secs []wasmSection, name string) (uint32, bool) {
	es, _ := readExportEntries(sectionContent(secs, secExport))
	for _, e := range es {
		if e.name == name {
			return e.index, true
		}
	}
	return 0, false
}

// checkSnapshot refuses to run a snapshot whose frozen start the grants
// contradict: the guest read its environment and its preopened
// directories while it initialised, before any grant existed.
func (m *module) checkSnapshot() error {
	if m.snap == nil {
		return nil
	}
	if m.abi != ABIReactor {
		return fmt.Errorf("%w: custom section %s marks a snapshot, which needs abi %q, not %q", ErrModule, snapshotSection, ABIReactor, m.abi)
	}
	if len(m.eff.env) > 0 {
		return fmt.Errorf("%w: grants.env: the module is a snapshot (pre-initialised): it read its environment when the snapshot was made, so it cannot be given one; run the module it was made from instead", ErrConfig)
	}
	if len(m.eff.mounts) > 0 {
		return fmt.Errorf("%w: grants.fs: the module is a snapshot (pre-initialised): it listed its directories when the snapshot was made, so it cannot be given one; run the module it was made from instead", ErrConfig)
	}
	return nil
}

// snapshotNanotime is a snapshot instance's monotonic clock: it starts
// 1 ms after the last reading the guest saw while it initialised, so that
// time never goes backwards for the Go runtime, which recorded its start
// then. With the clock granted it advances with the host's monotonic
// clock; without, like wazero's fake, by 1 ms a reading.
func snapshotNanotime(base int64, real bool) sys.Nanotime {
	if real {
		start := time.Now()
		return func() int64 { return base + int64(time.Millisecond) + int64(time.Since(start)) }
	}
	var t atomic.Int64
	t.Store(base)
	return func() int64 { return t.Add(int64(time.Millisecond)) }
}
