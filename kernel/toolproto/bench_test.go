package toolproto

import (
	"strings"
	"testing"
)

// benchAnswer is about size bytes of prose followed by two calls, the
// shape of a typical text-protocol answer.
func benchAnswer(c *Codec, size int) string {
	prose := strings.Repeat("The build failed in cmd/linkcheck; let me read the file and the log to see why (a < b). ", size/88+1)[:size]
	return c.FormatCalls(prose, []Call{{"read_file", `{"path": "cmd/linkcheck/main.go"}`}, {"search", `{"pattern": "func main", "glob": "*.go"}`}})
}

// BenchmarkDecode measures the parse cost per byte of a streamed answer,
// fed in 16-byte fragments (a token or a few, as servers stream them).
// MB/s converts to the cost per KB: 1 KB / (MB/s).
func BenchmarkDecode(b *testing.B) {
	for _, format := range Formats() {
		c := mustCodec(b, format)
		text := benchAnswer(c, 4096)
		b.Run(format, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				d := c.NewDecoder(DecoderConfig{})
				for i := 0; i < len(text); i += 16 {
					d.Write(text[i:min(i+16, len(text))], func(string) {})
				}
				if a := d.Close(nil); len(a.Calls) != 2 {
					b.Fatalf("%+v", a)
				}
			}
		})
	}
}
