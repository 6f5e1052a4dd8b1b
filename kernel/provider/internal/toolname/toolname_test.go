package toolname

import (
	"errors"
	"strings"
	"testing"
)

func TestEncode(t *testing.T) {
	long := strings.Repeat("a", 40) + "." + strings.Repeat("b", 30) // 71 bytes
	tests := []struct {
		name, want string
	}{
		{"read_file", "read_file"},
		{"get-weather", "get-weather"},
		{"fs.read", "fs__read"},
		{"mcp.github.create_issue", "mcp__github__create_issue"},
		{strings.Repeat("x", 64), strings.Repeat("x", 64)},
		// Too long once encoded: a cut name plus a hash.
		{long, strings.Repeat("a", 40) + "__" + strings.Repeat("b", 13) + "_" + "??"},
		// Characters the kernel does not allow still give a valid name.
		{"weird name!", "weird_name__" + "??"},
		{"", "_??"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Encode(tt.name)
			if !Valid(got) {
				t.Fatalf("Encode(%q) = %q, not a valid function name", tt.name, got)
			}
			if prefix, hashed := strings.CutSuffix(tt.want, "??"); hashed {
				// The hash is the last 8 characters.
				if len(got) != len(prefix)+hashLen || !strings.HasPrefix(got, prefix) {
					t.Errorf("Encode(%q) = %q, want %q + 8 hex digits", tt.name, got, prefix)
				}
				return
			}
			if got != tt.want {
				t.Errorf("Encode(%q) = %q, want %q", tt.name, got, tt.want)
			}
		})
	}
	t.Run("hash keeps long names apart", func(t *testing.T) {
		a := strings.Repeat("p", 60) + ".one"
		b := strings.Repeat("p", 60) + ".two"
		if Encode(a) == Encode(b) {
			t.Errorf("%q and %q both encode to %q", a, b, Encode(a))
		}
	})
}

func TestMap(t *testing.T) {
	offered := []string{"fs.read", "web.search", "plain", "a__b"}
	history := []string{"old.tool", "fs.read", "a.b"}
	m, err := NewMap(offered, history)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ wire, want string }{
		{"fs__read", "fs.read"},
		{"web__search", "web.search"},
		{"plain", "plain"},
		{"old__tool", "old.tool"}, // called earlier, no longer offered
		{"a__b", "a__b"},          // the offered name wins over history's "a.b"
		{"made_up", "made_up"},    // unknown names pass through for the kernel to reject
		{"fs.read", "fs.read"},
	}
	for _, tt := range tests {
		if got := m.Decode(tt.wire); got != tt.want {
			t.Errorf("Decode(%q) = %q, want %q", tt.wire, got, tt.want)
		}
	}
	for _, name := range offered {
		if got := m.Decode(Encode(name)); got != name {
			t.Errorf("round trip of %q gave %q", name, got)
		}
	}
	long := strings.Repeat("q", 70) + ".tool"
	if m, _ := NewMap([]string{long}, nil); m.Decode(Encode(long)) != long {
		t.Errorf("a hashed name does not decode back")
	}
	var zero Map
	if zero.Decode("x__y") != "x__y" {
		t.Error("the zero Map decodes")
	}
}

func TestMapCollision(t *testing.T) {
	for _, offered := range [][]string{
		{"a.b", "a__b"},
		{"a__b", "x", "a.b"},
	} {
		_, err := NewMap(offered, nil)
		var ce *CollisionError
		if !errors.As(err, &ce) {
			t.Fatalf("NewMap(%q): %v, want a *CollisionError", offered, err)
		}
		if ce.Wire != "a__b" || !strings.Contains(err.Error(), "rename one") {
			t.Errorf("NewMap(%q): %v", offered, err)
		}
	}
	if _, err := NewMap([]string{"a.b", "a.b"}, nil); err != nil {
		t.Errorf("the same name twice is not a collision here (the registry rejects duplicates): %v", err)
	}
}
