package sandbox

import (
	"reflect"
	"testing"
)

// fillSpec sets every exported field of spec to a value that is not its
// zero value, through reflection: a field added to spec and left out of
// the codec comes back zero and fails TestSpecCodecRoundTrip; a field of
// a kind fill does not know fails it too.
func fill(t *testing.T, v reflect.Value, seed int) {
	t.Helper()
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(seed*1000 + 7))
	case reflect.Uint16:
		v.SetUint(uint64(seed*100 + 3))
	case reflect.String:
		v.SetString("/s/" + string(rune('a'+seed%26)) + "\x00é")
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 3, 3)
		for i := range 3 {
			fill(t, s.Index(i), seed+i+1)
		}
		v.Set(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(t, p.Elem(), seed+1)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), seed+i+1)
			}
		}
	default:
		t.Fatalf("fill does not know %s: teach it and spec_codec.go the new field", v.Type())
	}
}

func TestSpecCodecRoundTrip(t *testing.T) {
	var full spec
	fill(t, reflect.ValueOf(&full).Elem(), 0)
	net := full
	net.Net = &Net{} // a net grant with no port: not nil
	for name, sp := range map[string]spec{"full": full, "zero": {}, "empty net": net} {
		got, err := decodeSpec(sp.encode())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, sp) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", name, got, sp)
		}
	}
}

// TestSpecCodecRefusesDamage: a spec cut short anywhere, or with bytes
// after it, is an error, never a spec with fields missing.
func TestSpecCodecRefusesDamage(t *testing.T) {
	var full spec
	fill(t, reflect.ValueOf(&full).Elem(), 0)
	b := full.encode()
	for n := range len(b) {
		if _, err := decodeSpec(b[:n]); err == nil {
			t.Fatalf("a spec cut at %d of %d bytes decoded", n, len(b))
		}
	}
	if _, err := decodeSpec(append(b, 0)); err == nil {
		t.Fatal("a spec with a byte after it decoded")
	}
}
