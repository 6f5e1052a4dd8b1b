package serve_test

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/internal/schema"
)

// The OpenAPI document, loaded once: every response a test gets is
// checked against it (status documented for the operation, body valid
// against the schema of that status).
type openAPIDoc struct {
	Paths map[string]map[string]json.RawMessage `json:"paths"`
	Comps struct {
		Responses map[string]struct {
			Content map[string]json.RawMessage `json:"content"`
		} `json:"responses"`
	} `json:"components"`
}

type operation struct {
	Responses map[string]struct {
		Ref     string                     `json:"$ref"`
		Content map[string]json.RawMessage `json:"content"`
	} `json:"responses"`
}

type route struct {
	template string
	re       *regexp.Regexp
	ops      map[string]operation // by lower-case method
}

var (
	apiOnce    sync.Once
	apiRoutes  []route
	apiSchemas map[string]*schema.Schema // by JSON pointer
	apiErr     error
)

func esc(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1") }

func loadOpenAPI() {
	data, err := os.ReadFile("openapi.json")
	if err != nil {
		apiErr = err
		return
	}
	var doc openAPIDoc
	if apiErr = json.Unmarshal(data, &doc); apiErr != nil {
		return
	}
	var refs []string
	for tmpl, item := range doc.Paths {
		rt := route{template: tmpl, ops: map[string]operation{}}
		segs := strings.Split(tmpl, "/")
		for i, sg := range segs {
			if strings.HasPrefix(sg, "{") {
				segs[i] = "[^/]+"
			} else {
				segs[i] = regexp.QuoteMeta(sg)
			}
		}
		rt.re = regexp.MustCompile("^" + strings.Join(segs, "/") + "$")
		for method, raw := range item {
			if method == "parameters" {
				continue
			}
			var op operation
			if apiErr = json.Unmarshal(raw, &op); apiErr != nil {
				return
			}
			rt.ops[method] = op
			for code, r := range op.Responses {
				if _, ok := r.Content["application/json"]; ok {
					refs = append(refs, "#/paths/"+esc(tmpl)+"/"+method+"/responses/"+code+"/content/application~1json/schema")
				}
			}
		}
		// "{id}" templates after literal ones: /v1/openapi.json must not
		// match a template.
		apiRoutes = append(apiRoutes, rt)
	}
	sort.Slice(apiRoutes, func(i, j int) bool {
		return strings.Count(apiRoutes[i].template, "{") < strings.Count(apiRoutes[j].template, "{")
	})
	for name, r := range doc.Comps.Responses {
		if _, ok := r.Content["application/json"]; ok {
			refs = append(refs, "#/components/responses/"+name+"/content/application~1json/schema")
		}
	}
	apiSchemas, apiErr = schema.CompileRefs("openapi.json", data, refs)
}

// checkAgainstOpenAPI fails t unless the response to method path is
// documented: its status among the operation's responses, and a JSON body
// valid against that response's schema.
func checkAgainstOpenAPI(t testing.TB, method, path string, r resp) {
	t.Helper()
	apiOnce.Do(loadOpenAPI)
	if apiErr != nil {
		t.Fatalf("openapi.json: %v", apiErr)
	}
	p, _, _ := strings.Cut(path, "?")
	for _, rt := range apiRoutes {
		if !rt.re.MatchString(p) {
			continue
		}
		op, ok := rt.ops[strings.ToLower(method)]
		if !ok {
			if r.status == 405 || r.status == 404 {
				return // not an operation: the mux answers
			}
			t.Fatalf("openapi.json: %s has no %s operation (got %d)", rt.template, method, r.status)
		}
		code := strconvItoa(r.status)
		res, ok := op.Responses[code]
		if !ok {
			t.Fatalf("openapi.json: %s %s does not document status %d (body %s)", method, rt.template, r.status, r.body)
		}
		ptr := "#/paths/" + esc(rt.template) + "/" + strings.ToLower(method) + "/responses/" + code + "/content/application~1json/schema"
		if res.Ref != "" {
			ptr = strings.TrimPrefix(res.Ref, "") + "/content/application~1json/schema"
		}
		ct := r.header.Get("Content-Type")
		if !strings.HasPrefix(ct, "application/json") {
			if res.Ref == "" && res.Content != nil {
				for want := range res.Content {
					if strings.HasPrefix(ct, want) {
						return
					}
				}
			}
			if len(r.body) == 0 && res.Content == nil {
				return
			}
			t.Fatalf("openapi.json: %s %s %d: content type %q is not documented", method, rt.template, r.status, ct)
		}
		s := apiSchemas[ptr]
		if s == nil {
			t.Fatalf("openapi.json: %s %s %d has no JSON schema (%s)", method, rt.template, r.status, ptr)
		}
		if err := s.ValidateJSON(r.body); err != nil {
			t.Fatalf("openapi.json: %s %s %d: the body does not match the document: %v\n%s", method, path, r.status, err, r.body)
		}
		return
	}
	if strings.HasPrefix(p, "/v1/") && r.status != 404 {
		t.Fatalf("openapi.json: no path matches %s %s (status %d)", method, p, r.status)
	}
}

func strconvItoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
