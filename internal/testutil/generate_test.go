package testutil

import (
	"strings"
	"testing"
)

func TestRewriteJSON(t *testing.T) {
	src := `{
  "a": {"enum": ["x", "y"]},
  "list": [
    1,
    {"b": "c"}
  ],
  "s~/t": "v"
}
`
	t.Run("same values keep their bytes", func(t *testing.T) {
		got, differ, err := RewriteJSON([]byte(src), []JSONEdit{
			{"/a/enum", []string{"x", "y"}},
			{"/list/1", Object{{"b", "c"}}},
			{"/s~0~1t", "v"},
		})
		if err != nil || string(got) != src || len(differ) != 0 {
			t.Fatalf("%v %v\n%s", err, differ, got)
		}
	})
	t.Run("a changed value is rewritten in place", func(t *testing.T) {
		got, differ, err := RewriteJSON([]byte(src), []JSONEdit{{"/a/enum", []string{"x", "y", "z"}}, {"/list/0", 2}})
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Replace(strings.Replace(src, `["x", "y"]`, `["x", "y", "z"]`, 1), "    1,", "    2,", 1)
		if string(got) != want || len(differ) != 2 {
			t.Fatalf("%v\n%s", differ, got)
		}
	})
	t.Run("a long value takes one member a line", func(t *testing.T) {
		long := make([]string, 12)
		for i := range long {
			long[i] = "a-rather-long-name"
		}
		got, _, err := RewriteJSON([]byte(src), []JSONEdit{{"/a", Object{{"enum", long}}}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(got), "  \"a\": {\n    \"enum\": [\n      \"a-rather-long-name\",\n") {
			t.Fatalf("%s", got)
		}
		var back struct {
			A struct{ Enum []string } `json:"a"`
		}
		if err := JSONAt(got, "", &back); err != nil || len(back.A.Enum) != 12 {
			t.Fatal(err, back)
		}
	})
	t.Run("a pointer that names nothing", func(t *testing.T) {
		if _, _, err := RewriteJSON([]byte(src), []JSONEdit{{"/a/nope", 1}}); err == nil {
			t.Fatal("no error")
		}
	})
}

func TestReplaceBetween(t *testing.T) {
	text := "head\n<!-- begin -->\nold\nrows\n<!-- end -->\ntail\n"
	got, err := ReplaceBetween(text, "<!-- begin", "<!-- end", "new\n")
	if err != nil || got != "head\n<!-- begin -->\nnew\n<!-- end -->\ntail\n" {
		t.Fatalf("%v %q", err, got)
	}
	if _, err := ReplaceBetween(text, "<!-- nope", "<!-- end", ""); err == nil {
		t.Fatal("no error for a missing marker")
	}
}
