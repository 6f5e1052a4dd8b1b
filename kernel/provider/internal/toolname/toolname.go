// Package toolname maps kernel tool names to OpenAI function names and back.
//
// Kernel tool names may contain "." (plugin tools are namespaced
// "plugin.tool"), but OpenAI function names must match
// ^[a-zA-Z0-9_-]{1,64}$. Encode turns a kernel name into a valid function
// name deterministically; a Map built from the names of one request decodes
// the model's function names back, so the kernel only ever sees its own names.
package toolname

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// MaxLen is the longest function name OpenAI accepts.
const MaxLen = 64

// hashLen is how many hex digits of the name's sha256 a long or oddly
// spelled name keeps to stay unique.
const hashLen = 8

// Encode returns the function name sent on the wire for a kernel tool name.
// Every "." becomes "__". A result that is still not a valid function name
// (it has other characters, or is longer than MaxLen) becomes the name with
// every invalid character replaced by "_", cut to fit, followed by "_" and
// the first 8 hex digits of the name's sha256.
func Encode(name string) string {
	if Valid(name) {
		return name // the common case: no dots, nothing to do
	}
	enc := strings.ReplaceAll(name, ".", "__")
	if Valid(enc) {
		return enc
	}
	var b strings.Builder
	for i := 0; i < len(enc); i++ {
		if validByte(enc[i]) {
			b.WriteByte(enc[i])
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if max := MaxLen - hashLen - 1; len(s) > max {
		s = s[:max]
	}
	sum := sha256.Sum256([]byte(name))
	return s + "_" + hex.EncodeToString(sum[:])[:hashLen]
}

// Valid reports whether s is a valid OpenAI function name.
func Valid(s string) bool {
	if len(s) == 0 || len(s) > MaxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !validByte(s[i]) {
			return false
		}
	}
	return true
}

func validByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// CollisionError says that two offered tools have the same wire name.
type CollisionError struct {
	A, B string // the kernel names
	Wire string // the function name both encode to
}

func (e *CollisionError) Error() string {
	return fmt.Sprintf("tools %q and %q both become the OpenAI function name %q; rename one of them", e.A, e.B, e.Wire)
}

// Map decodes the function names of one request back to kernel names. The
// zero Map decodes nothing. A Map is not modified after NewMap returns and is
// safe for concurrent use.
type Map struct {
	kernel map[string]string // wire name → kernel name
}

// NewMap builds the Map of one request. offered are the names of the tools
// offered in this generation; two of them with the same wire name are a
// *CollisionError. history are other names the conversation used (tools
// called earlier that may no longer be offered); they decode too, but never
// shadow an offered name.
func NewMap(offered, history []string) (Map, error) {
	seen := make(map[string]string, len(offered)) // wire → kernel, offered only
	for _, name := range offered {
		wire := Encode(name)
		if other, ok := seen[wire]; ok && other != name {
			return Map{}, &CollisionError{A: other, B: name, Wire: wire}
		}
		seen[wire] = name
	}
	m := Map{kernel: make(map[string]string)}
	for wire, name := range seen {
		if wire != name {
			m.kernel[wire] = name
		}
	}
	for _, name := range history {
		wire := Encode(name)
		if wire == name {
			continue
		}
		if _, ok := seen[wire]; ok {
			continue // an offered name wins
		}
		if _, ok := m.kernel[wire]; !ok {
			m.kernel[wire] = name
		}
	}
	return m, nil
}

// Decode returns the kernel name for a wire name. A name the request did not
// use is returned unchanged, so the kernel reports it as an unknown tool.
func (m Map) Decode(wire string) string {
	if name, ok := m.kernel[wire]; ok {
		return name
	}
	return wire
}
