package declared_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/tool"
)

const ticketTools = `
tools:
  http:
    - name: get_ticket
      description: Look up a ticket and its comments.
      url: http://api.example.test/v1/tickets/{id}/comments?fields={fields}&tag={tags}&limit=20
      args:
        type: object
        required: [id]
        properties:
          id: {type: string}
          fields: {type: string}
          tags: {type: array, items: {type: string}}
    - name: create_ticket
      description: Open a ticket.
      method: POST
      url: http://api.example.test/v1/projects/{project}/tickets
      headers:
        X-Request-Note: "{note}"
      body:
        title: "{title}"
        priority: "{priority}"
        labels: ["from-agent", "{label}"]
        meta: {source: "agent {title}"}
      args:
        type: object
        required: [project, title]
        properties:
          project: {type: string}
          title: {type: string}
          priority: {type: integer}
          label: {type: string}
          note: {type: string}
`

// TestHTTPGetAndPost: GET and POST tools against a local server, with
// path, query and body templates; values holding ../, ?, #, newlines and
// JSON quotes land as data, not structure.
func TestHTTPGetAndPost(t *testing.T) {
	a := newAPI(t, nil)
	tools := mustBuild(t, ticketTools, options(a, nil, "api.example.test"))
	get, post := tools["get_ticket"], tools["create_ticket"]
	if get.Spec().Tier != tool.TierReadOnly || post.Spec().Tier != tool.TierSideEffecting || get.Spec().Source != "http" {
		t.Errorf("tiers %s, %s; source %s", get.Spec().Tier, post.Spec().Tier, get.Spec().Source)
	}

	for _, id := range []string{"../../admin", "a?b=c", "x#frag", "line\nbreak", `q"}`, "50% off/ünï"} {
		res, err := call(t, get, map[string]any{"id": id, "fields": "a&b=c#d", "tags": []string{"x y", "z&w"}})
		if err != nil || res.Content != `{"ok":true}` {
			t.Fatalf("id %q: %v %q", id, err, res.Content)
		}
		r := a.last(t)
		if want := "/v1/tickets/" + id + "/comments"; r.Path != want {
			t.Errorf("id %q: the server's path is %q, want %q", id, r.Path, want)
		}
		if strings.Count(r.RawPath, "/") != 4 || strings.ContainsAny(r.RawPath, "?#\n") {
			t.Errorf("id %q: the raw path %q has structure from the argument", id, r.RawPath)
		}
		if r.Query["fields"][0] != "a&b=c#d" || len(r.Query["tag"]) != 2 || r.Query["tag"][0] != "x y" || r.Query["tag"][1] != "z&w" || r.Query["limit"][0] != "20" || len(r.Query) != 3 {
			t.Errorf("id %q: query %q", id, r.RawQuery)
		}
	}
	// An absent optional argument leaves its pair out.
	if _, err := call(t, get, map[string]any{"id": "7"}); err != nil {
		t.Fatal(err)
	}
	if r := a.last(t); r.RawQuery != "limit=20" {
		t.Errorf("query without the optional arguments: %q", r.RawQuery)
	}
	// "." and ".." are not path segments.
	if _, err := call(t, get, map[string]any{"id": ".."}); !errors.Is(err, &tool.Error{Code: tool.CodeInvalidArgs}) {
		t.Errorf(`id "..": %v`, err)
	}

	inject := `x", "admin": true, "y": "`
	_, err := call(t, post, map[string]any{"project": "p/../q", "title": inject, "priority": 2, "label": "urgent", "note": "a\r\nX-Admin: yes"})
	if !errors.Is(err, &tool.Error{Code: tool.CodeInvalidArgs}) || !strings.Contains(err.Error(), "line break") {
		t.Fatalf("a header value with CRLF: %v", err)
	}
	res, err := call(t, post, map[string]any{"project": "p/../q", "title": inject, "priority": 2, "label": "urgent", "note": "from a test"})
	if err != nil {
		t.Fatalf("%v %q", err, res.Content)
	}
	r := a.last(t)
	if r.Method != "POST" || r.Path != "/v1/projects/p/../q/tickets" || r.RawPath != "/v1/projects/p%2F..%2Fq/tickets" || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("X-Request-Note") != "from a test" {
		t.Errorf("request %+v", r)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(r.Body), &body); err != nil {
		t.Fatalf("body %q: %v", r.Body, err)
	}
	if body["title"] != inject || body["priority"] != float64(2) || len(body) != 4 || body["admin"] != nil {
		t.Errorf("body %q", r.Body)
	}
	if labels := body["labels"].([]any); len(labels) != 2 || labels[1] != "urgent" {
		t.Errorf("labels %v", labels)
	}
	if meta := body["meta"].(map[string]any); meta["source"] != "agent "+inject {
		t.Errorf("meta %v", meta)
	}
}

// TestHTTPDefaultBody: without a body template a POST sends the arguments
// the URL does not use.
func TestHTTPDefaultBody(t *testing.T) {
	a := newAPI(t, nil)
	tools := mustBuild(t, `
tools:
  http:
    - name: add_pet
      description: Add a pet.
      method: POST
      url: http://api.example.test/pets/{store}
      args: {type: object, required: [store], properties: {store: {type: string}, name: {type: string}, age: {type: integer}}}
`, options(a, nil, "api.example.test"))
	if _, err := call(t, tools["add_pet"], map[string]any{"store": "s1", "name": "Rex", "age": 12345678901234567}); err != nil {
		t.Fatal(err)
	}
	if b := a.last(t).Body; b != `{"age":12345678901234567,"name":"Rex"}` {
		t.Errorf("body %s", b)
	}
}

// TestHTTPAnswers: status mapping, content types, jq, and the answers a
// bad server gives — 10 GB, none, redirects forever, invalid UTF-8 — each
// a bounded tool error or a clean result, never a hang.
func TestHTTPAnswers(t *testing.T) {
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	a := newAPI(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/missing":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(404)
			io.WriteString(w, `{"error":"no ticket 9"}`)
		case "/broken":
			w.WriteHeader(503)
		case "/huge":
			w.Header().Set("Content-Type", "text/plain")
			chunk := []byte(strings.Repeat("x", 64<<10))
			for i := 0; i < 10<<20/64; i++ { // 10 GB, if anyone read it
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case "/never":
			select {
			case <-r.Context().Done():
			case <-hang:
			}
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/latin1":
			w.Header().Set("Content-Type", "text/plain; charset=iso-8859-1")
			w.Write([]byte("caf\xe9"))
		case "/badutf8":
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("ok \xff\xfe end"))
		case "/image":
			w.Header().Set("Content-Type", "image/png")
			w.Write([]byte("\x89PNG"))
		case "/items":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"items":[{"id":1,"title":"a","body":"`+strings.Repeat("long ", 1000)+`"},{"id":12345678901,"title":"b"}]}`)
		}
	})
	tools := mustBuild(t, `
tools:
  http:
    - {name: fetch, description: Fetch a path., url: "http://api.example.test/{p}", timeout: 300ms,
       args: {type: object, required: [p], properties: {p: {type: string}}}, response: {max_bytes: 100000}}
    - {name: items, description: List items., url: "http://api.example.test/items", response: {jq: ".items[] | {id, title}"}}
`, options(a, nil, "api.example.test"))
	fetch := func(p string) (tool.Result, error) { return call(t, tools["fetch"], map[string]string{"p": p}) }

	for _, c := range []struct {
		path, code, says string
	}{
		{"missing", tool.CodeNotFound, `HTTP 404 Not Found` + "\n" + `{"error":"no ticket 9"}`},
		{"broken", tool.CodeUnavailable, "HTTP 503"},
		{"huge", tool.CodeToolError, "longer than 100000 bytes"},
		{"never", tool.CodeTimeout, "no answer within 300ms"},
		{"loop", tool.CodePermissionDenied, "rule max_redirects"},
		{"image", tool.CodeToolError, "answered image/png, which this tool does not accept"},
	} {
		start := time.Now()
		res, err := fetch(c.path)
		if !errors.Is(err, &tool.Error{Code: c.code}) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v (%q), want code %s saying %q", c.path, err, res.Content, c.code, c.says)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%s took %s", c.path, d)
		}
	}
	if res, err := fetch("latin1"); err != nil || res.Content != "café" {
		t.Errorf("latin1: %q %v", res.Content, err)
	}
	if res, err := fetch("badutf8"); err != nil || res.Content != "ok \uFFFD end" {
		t.Errorf("invalid UTF-8: %q %v", res.Content, err)
	}
	res, err := call(t, tools["items"], map[string]any{})
	if err != nil || res.Content != `{"id":1,"title":"a"}`+"\n"+`{"id":12345678901,"title":"b"}` {
		t.Errorf("jq: %q %v", res.Content, err)
	}
}

// TestHTTPSecretsRedacted: the secret a header and the query send is in
// the request, and nowhere in what the tool returns — neither when the
// server echoes it in an answer nor in an error, nor escaped in a URL.
func TestHTTPSecretsRedacted(t *testing.T) {
	const key, qkey = "tk-Hd93kLq0zP7w", "q+k/ey=Zx81&2mVb"
	a := newAPI(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if r.URL.Path == "/fail" {
			w.WriteHeader(401)
		}
		io.WriteString(w, "you sent "+r.Header.Get("Authorization")+" and "+r.URL.RawQuery+" and "+r.URL.Query().Get("key"))
	})
	e := env{"TICKETS_TOKEN": key, "TICKETS_QKEY": qkey}
	tools := mustBuild(t, `
tools:
  http:
    - name: echo
      description: Echo.
      url: "http://api.example.test/{p}?key=${env:TICKETS_QKEY}"
      headers: {Authorization: "Bearer ${env:TICKETS_TOKEN}"}
      args: {type: object, required: [p], properties: {p: {type: string}}}
    - name: elsewhere
      description: A host that does not resolve.
      url: "http://down.example.test/x?key=${env:TICKETS_QKEY}"
      headers: {Authorization: "Bearer ${env:TICKETS_TOKEN}"}
`, options(a, e, "api.example.test"))
	res, err := call(t, tools["echo"], map[string]string{"p": "ok"})
	if err != nil {
		t.Fatal(err)
	}
	if r := a.last(t); r.Header.Get("Authorization") != "Bearer "+key || r.Query["key"][0] != qkey {
		t.Fatalf("the request did not carry the secrets: %+v", r)
	}
	_, ferr := call(t, tools["echo"], map[string]string{"p": "fail"})
	_, uerr := call(t, tools["elsewhere"], map[string]string{})
	if ferr == nil || uerr == nil {
		t.Fatalf("errors expected: %v, %v", ferr, uerr)
	}
	for what, text := range map[string]string{"result": res.Content, "status error": ferr.Error(), "connection error": uerr.Error()} {
		for _, secret := range []string{key, qkey, "q%2Bk%2Fey%3DZx81%262mVb"} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s holds a secret: %s", what, text)
			}
		}
		if !strings.Contains(text, "[REDACTED]") && what != "connection error" {
			t.Errorf("the %s does not show where the secret was: %s", what, text)
		}
	}
	if !errors.Is(ferr, &tool.Error{Code: tool.CodePermissionDenied}) {
		t.Errorf("401 is not permission_denied: %v", ferr)
	}
}

// TestSSRFThroughTool: a declared tool's egress is the guarded dialer's:
// 127.0.0.1 and the metadata address are refused with the rule's name,
// as a permission_denied tool error; the server never hears of it.
func TestSSRFThroughTool(t *testing.T) {
	a := newAPI(t, nil)
	o := options(nil, nil) // the real network
	tools := mustBuild(t, `
tools:
  http:
    - {name: local, description: A loopback service., url: "`+a.URL+`/admin"}
    - {name: metadata, description: Instance metadata., url: "http://169.254.169.254/latest/meta-data/"}
`, o)
	for name, rule := range map[string]string{"local": "loopback", "metadata": "metadata"} {
		_, err := call(t, tools[name], map[string]any{})
		if !errors.Is(err, &tool.Error{Code: tool.CodePermissionDenied}) || !strings.Contains(err.Error(), "rule "+rule) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if a.count() != 0 {
		t.Errorf("the loopback server got %d requests", a.count())
	}
}

// TestLoadErrors: a bad entry is refused at load with the file, the
// entry's line, the tool and the field, and says what to do.
func TestLoadErrors(t *testing.T) {
	e := env{"SHORT": "abc", "OK_TOKEN": "ok-token-123456"}
	for _, c := range []struct{ name, entry, field, says string }{
		{"an argument the schema lacks", `{name: t, description: d, url: "https://a.test/x/{idd}", args: {type: object, required: [id], properties: {id: {type: string}}}}`,
			"url", "{idd} names an argument args does not declare (args declares id)"},
		{"a path argument not required", `{name: t, description: d, url: "https://a.test/x/{id}", args: {type: object, properties: {id: {type: string}}}}`,
			"url", "must list it in required"},
		{"an unknown variable", `{name: t, description: d, url: "https://a.test/x", headers: {Authorization: "Bearer ${env:NOPE_TOKEN}"}}`,
			"headers", "NOPE_TOKEN is not set"},
		{"a secret too short to redact", `{name: t, description: d, url: "https://a.test/x", headers: {X-Key: "${env:SHORT}"}}`,
			"headers", "shorter than the 8"},
		{"an empty host list", `{name: t, description: d, url: "https://a.test/x", egress: {hosts: []}}`,
			"egress.hosts", "is empty"},
		{"the URL's host not in the list", `{name: t, description: d, url: "https://a.test/x", egress: {hosts: [b.test]}}`,
			"egress.hosts", "the URL's host a.test is not in the list"},
		{"a templated host", `{name: t, description: d, url: "https://{host}/x", args: {type: object, properties: {host: {type: string}}}}`,
			"url", "the host must be written out"},
		{"a secret in the path", `{name: t, description: d, url: "https://a.test/${env:OK_TOKEN}/x"}`,
			"url", "cannot be in the path"},
		{"a bad jq", `{name: t, description: d, url: "https://a.test/x", response: {jq: ".items[" }}`,
			"response.jq", ""},
		{"a body on GET", `{name: t, description: d, url: "https://a.test/x", body: {a: 1}}`,
			"body", "has no body"},
		{"no description", `{name: t, url: "https://a.test/x"}`,
			"description", "is empty"},
		{"a bad name", `{name: "has space", description: d, url: "https://a.test/x"}`,
			"name", "must be"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := build(t, "tools:\n  http:\n    - name: first\n      description: fine\n      url: https://a.test/\n    - "+c.entry+"\n", options(nil, e))
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *config.Error", err)
			}
			if ce.File != "kernel.yaml" || ce.Line != 6 || ce.Field != c.field || !strings.Contains(err.Error(), c.says) {
				t.Errorf("err = %v (line %d, field %q), want line 6, field %q, saying %q", err, ce.Line, ce.Field, c.field, c.says)
			}
			if strings.Contains(err.Error(), "ok-token-123456") {
				t.Errorf("the error holds a secret: %v", err)
			}
		})
	}
	_, err := build(t, "tools:\n  http:\n    - {name: a, description: d, url: \"https://a.test/\", bogus: 1}\n", options(nil, e))
	if err == nil || !strings.Contains(err.Error(), `unknown field "bogus"`) || !strings.Contains(err.Error(), "kernel.yaml:3") {
		t.Errorf("unknown field: %v", err)
	}
	_, err = build(t, "tools:\n  http:\n    - {name: a, description: d, url: \"https://a.test/\"}\n  inline:\n    - {name: a, description: d, text: x}\n", options(nil, e))
	if err == nil || !strings.Contains(err.Error(), "also the name of a http tool") {
		t.Errorf("duplicate name: %v", err)
	}
}

// TestHTTPPreview: the preview is the request the call would send, built
// by the same code, with each secret shown as the variable it comes from;
// nothing is sent; arguments the call would refuse make a refused preview.
func TestHTTPPreview(t *testing.T) {
	const key = "tk-Pv83hQ1mZ6"
	a := newAPI(t, nil)
	tools := mustBuild(t, `
tools:
  http:
    - name: create
      description: Open a ticket.
      method: POST
      url: "http://api.example.test/v1/{project}/tickets?key=${env:PV_KEY}"
      headers: {Authorization: "Bearer ${env:PV_KEY}", X-Note: "{note}"}
      body: {title: "{title}"}
      args: {type: object, required: [project, title], properties: {project: {type: string}, title: {type: string}, note: {type: string}}}
`, options(a, env{"PV_KEY": key}, "api.example.test"))
	pv, ok := tools["create"].(tool.Previewer)
	if !ok {
		t.Fatal("an HTTP tool has no preview")
	}
	p, err := pv.Preview(t.Context(), json.RawMessage(`{"project": "a/b", "title": "Disk \"full\"", "note": "n1"}`))
	if err != nil || p.Refused || p.Request == nil {
		t.Fatalf("%+v %v", p, err)
	}
	r := p.Request
	if r.Method != "POST" || r.URL != "http://api.example.test/v1/a%2Fb/tickets?key=${env:PV_KEY}" || r.Body != `{"title":"Disk \"full\""}` ||
		r.Header["Authorization"][0] != "Bearer ${env:PV_KEY}" || r.Header["X-Note"][0] != "n1" {
		t.Errorf("preview %+v", r)
	}
	b, _ := json.Marshal(p)
	if strings.Contains(string(b), key) {
		t.Errorf("the preview holds the secret: %s", b)
	}
	if a.count() != 0 {
		t.Error("a preview sent the request")
	}
	p, err = pv.Preview(t.Context(), json.RawMessage(`{"project": "..", "title": "x"}`))
	if err != nil || !p.Refused || !strings.Contains(p.Summary, "cannot be a segment") {
		t.Errorf("a refused call's preview: %+v %v", p, err)
	}
}
