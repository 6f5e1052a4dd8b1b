package serve_test

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestDocsAgreeWithOpenAPI: docs/serve.md names every operation of the
// OpenAPI document as "METHOD /path", and names no operation the document
// lacks; every operation exists on the server (not the catch-all 404).
func TestDocsAgreeWithOpenAPI(t *testing.T) {
	data, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	ops := map[string]bool{}
	for p, item := range doc.Paths {
		for m := range item {
			if m != "parameters" {
				ops[strings.ToUpper(m)+" "+p] = true
			}
		}
	}
	md, err := os.ReadFile("../docs/serve.md")
	if err != nil {
		t.Fatal(err)
	}
	mentioned := map[string]bool{}
	for _, m := range regexp.MustCompile("`(GET|POST|PUT|PATCH|DELETE) (/[^` ?]*)").FindAllStringSubmatch(string(md), -1) {
		mentioned[m[1]+" "+m[2]] = true
	}
	var missing, extra []string
	for op := range ops {
		if !mentioned[op] {
			missing = append(missing, op)
		}
	}
	for op := range mentioned {
		if !ops[op] {
			extra = append(extra, op)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("docs/serve.md does not describe %s", strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		t.Errorf("docs/serve.md names operations the OpenAPI document lacks: %s", strings.Join(extra, ", "))
	}

	r := newRig(t, rigOpts{})
	for op := range ops {
		method, path, _ := strings.Cut(op, " ")
		path = strings.NewReplacer("{id}", "nope", "{run}", "nope").Replace(path)
		p := r.do(method, path, "", nil)
		if p.status == 404 && strings.Contains(string(p.body), "no endpoint") || p.status == 405 {
			t.Errorf("%s is in the OpenAPI document but not served (%d)", op, p.status)
		}
	}
}
