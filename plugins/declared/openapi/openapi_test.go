package openapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/internal/egress/egresstest"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/declared"
	"github.com/agentkernel/agentkernel/plugins/declared/openapi"
)

func load(t testing.TB, file string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// emulation is a local server standing for an API: it records each
// request and answers with answer.
type emulation struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
	body []string
}

func emulate(t *testing.T, answer func(r *http.Request, body string) (int, any)) *emulation {
	e := &emulation{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.reqs, e.body = append(e.reqs, r), append(e.body, string(b))
		e.mu.Unlock()
		status, v := answer(r, string(b))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *emulation) last() (*http.Request, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reqs[len(e.reqs)-1], e.body[len(e.body)-1]
}

// tools builds the imported entries as the kernel does, with every
// host's requests led to e and the variables in env.
func tools(t *testing.T, res *openapi.Result, e *emulation, host string, env map[string]string) map[string]kernel.Tool {
	t.Helper()
	y, err := yaml.Marshal(res.Tools)
	if err != nil {
		t.Fatal(err)
	}
	var n yaml.Node
	if err := yaml.Unmarshal(y, &n); err != nil {
		t.Fatal(err)
	}
	c, err := declared.Decode("kernel.yaml", n.Content[0], nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &egresstest.Resolver{}
	r.Set(host, []string{"203.0.113.80"})
	s, err := declared.Build(c, declared.Options{File: "kernel.yaml", Resolver: r, Network: &egresstest.Network{Target: strings.TrimPrefix(e.URL, "http://")},
		Getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	reg := kernel.NewRegistry()
	out := map[string]kernel.Tool{}
	for _, src := range s.Sources() {
		if err := reg.Register(s.Tools[src]...); err != nil {
			t.Fatalf("the imported tools do not register: %v", err)
		}
		for _, tl := range s.Tools[src] {
			out[tl.Spec().Name] = tl
		}
	}
	return out
}

func call(t *testing.T, tl kernel.Tool, args string) string {
	t.Helper()
	reg := kernel.NewRegistry()
	reg.Register(tl)
	if _, err := reg.Validate(tl.Spec().Name, json.RawMessage(args)); err != nil {
		t.Fatalf("%s: the arguments do not validate: %v", tl.Spec().Name, err)
	}
	res, err := tl.Call(context.Background(), json.RawMessage(args))
	if err != nil {
		t.Fatalf("%s: %v", tl.Spec().Name, err)
	}
	return res.Content
}

// TestPetstore: the Petstore 3.0 document, imported whole, gives one tool
// per operation (but the one with a binary body, said so) with tiers from methods and its security schemes as
// variables; three of its operations work against a local emulation.
func TestPetstore(t *testing.T) {
	res, err := openapi.Import(load(t, "petstore3.yaml"), openapi.Options{File: "petstore3.yaml", Prefix: "petstore.", BaseURL: "http://petstore.test/api/v3"})
	if err != nil {
		t.Fatal(err)
	}
	// 19 operations; uploadFile's body is application/octet-stream, which
	// the import says it leaves out.
	if len(res.Tools) != 18 || res.Version != "3.0.4" || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "uploadFile left out: its request body is application/octet-stream") {
		t.Fatalf("%d tools, version %s; notes %q", len(res.Tools), res.Version, res.Notes)
	}
	var envs []string
	for _, e := range res.Env {
		envs = append(envs, e.Name)
	}
	if strings.Join(envs, ",") != "PETSTORE_API_KEY,PETSTORE_PETSTORE_AUTH" {
		t.Errorf("variables %q", envs)
	}
	e := emulate(t, func(r *http.Request, body string) (int, any) {
		switch {
		case r.Method == "GET" && r.URL.Path == "/api/v3/pet/7":
			return 200, map[string]any{"id": 7, "name": "Rex", "photoUrls": []string{}, "status": "available"}
		case r.Method == "POST" && r.URL.Path == "/api/v3/pet":
			var pet map[string]any
			json.Unmarshal([]byte(body), &pet)
			pet["id"] = 8
			return 200, pet
		case r.Method == "GET" && r.URL.Path == "/api/v3/pet/findByStatus":
			return 200, []map[string]any{{"id": 7, "name": "Rex", "status": r.URL.Query().Get("status")}}
		}
		return 404, map[string]string{"message": "no route"}
	})
	ts := tools(t, res, e, "petstore.test", map[string]string{"PETSTORE_API_KEY": "pk-1234567890", "PETSTORE_PETSTORE_AUTH": "oauth-token-123456"})
	get, add, find := ts["petstore.getPetById"], ts["petstore.addPet"], ts["petstore.findPetsByStatus"]
	if get == nil || add == nil || find == nil {
		t.Fatalf("tools: %v", ts)
	}
	if get.Spec().Tier != "read_only" || add.Spec().Tier != "side_effecting" || get.Spec().Source != "openapi:petstore3.yaml" {
		t.Errorf("specs %+v %+v", get.Spec(), add.Spec())
	}
	if out := call(t, get, `{"petId": 7}`); !strings.Contains(out, `"name":"Rex"`) {
		t.Errorf("getPetById: %s", out)
	}
	if r, _ := e.last(); r.Header.Get("api_key") != "pk-1234567890" {
		t.Errorf("getPetById sent api_key %q", r.Header.Get("api_key"))
	}
	out := call(t, add, `{"body": {"name": "Tom", "photoUrls": ["a.png"], "status": "pending", "category": {"id": 1, "name": "cats"}}}`)
	if r, body := e.last(); !strings.Contains(out, `"id":8`) || r.Header.Get("Authorization") != "Bearer oauth-token-123456" || !strings.Contains(body, `"name":"Tom"`) {
		t.Errorf("addPet: %s; sent %s with %q", out, body, r.Header.Get("Authorization"))
	}
	if out := call(t, find, `{"status": "sold"}`); !strings.Contains(out, `"status":"sold"`) {
		t.Errorf("findPetsByStatus: %s", out)
	}
}

// TestAdyen31: a larger real-world document in OpenAPI 3.1 (Adyen's
// Configuration API), two tags of it, the API-key scheme chosen; three of
// its operations work against a local emulation.
func TestAdyen31(t *testing.T) {
	res, err := openapi.Import(load(t, "adyen-balanceplatform-v2.json"), openapi.Options{File: "adyen-balanceplatform-v2.json", Prefix: "adyen.",
		Tags: []string{"Account holders", "Balance accounts"}, Security: "ApiKeyAuth", BaseURL: "https://adyen.test/bcl/v2"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != "3.1.0" || len(res.Tools) < 10 {
		t.Fatalf("version %s, %d tools; notes %q", res.Version, len(res.Tools), res.Notes)
	}
	if len(res.Env) != 1 || res.Env[0].Name != "ADYEN_APIKEYAUTH" {
		t.Errorf("variables %+v", res.Env)
	}
	e := emulate(t, func(r *http.Request, body string) (int, any) {
		switch {
		case r.Method == "GET" && r.URL.Path == "/bcl/v2/accountHolders/AH32272223222B5CM4MWJ892H":
			return 200, map[string]any{"id": "AH32272223222B5CM4MWJ892H", "status": "active"}
		case r.Method == "POST" && r.URL.Path == "/bcl/v2/balanceAccounts":
			return 200, map[string]any{"id": "BA3227C223222B5FG88S28BGN", "echo": json.RawMessage(body)}
		case r.Method == "GET" && r.URL.Path == "/bcl/v2/balanceAccounts/BA32272223222B59K6ZXHBFN6/paymentInstruments":
			return 200, map[string]any{"paymentInstruments": []any{}, "query": r.URL.RawQuery}
		}
		return 404, map[string]string{"message": "no route " + r.URL.Path}
	})
	// The emulation speaks plain HTTP: the imported https URLs are rewritten
	// as a test's, not the import's, business.
	for i := range res.Tools {
		res.Tools[i].URL = strings.Replace(res.Tools[i].URL, "https://", "http://", 1)
	}
	ts := tools(t, res, e, "adyen.test", map[string]string{"ADYEN_APIKEYAUTH": "AQE1234567890abcdef"})
	out := call(t, ts["adyen.get-accountHolders-id"], `{"id": "AH32272223222B5CM4MWJ892H"}`)
	if r, _ := e.last(); !strings.Contains(out, `"status":"active"`) || r.Header.Get("X-API-Key") != "AQE1234567890abcdef" {
		t.Errorf("get-accountHolders-id: %s (X-API-Key %q)", out, r.Header.Get("X-API-Key"))
	}
	out = call(t, ts["adyen.post-balanceAccounts"], `{"body": {"accountHolderId": "AH32272223222B5CM4MWJ892H", "description": "S.Hopper - Main"}}`)
	if !strings.Contains(out, `"accountHolderId":"AH32272223222B5CM4MWJ892H"`) {
		t.Errorf("post-balanceAccounts: %s", out)
	}
	out = call(t, ts["adyen.get-balanceAccounts-id-paymentInstruments"], `{"id": "BA32272223222B59K6ZXHBFN6", "limit": 10, "offset": 0, "status": "active"}`)
	if !strings.Contains(out, `limit=10`) || !strings.Contains(out, `status=active`) {
		t.Errorf("get-balanceAccounts-id-paymentInstruments: %s", out)
	}
}

// TestBadDocuments: a document with cycles, without operationIds, with
// 2,000 operations, or not OpenAPI 3 at all, is imported with notes naming
// the lines, or refused with a message that says what to do.
func TestBadDocuments(t *testing.T) {
	cyclic := `openapi: 3.1.0
info: {title: Trees, version: "1"}
servers: [{url: "https://trees.test/v1"}]
paths:
  /nodes:
    post:
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Node"}
      responses: {"200": {description: ok}}
components:
  schemas:
    Node:
      type: object
      properties:
        name: {type: string}
        children: {type: array, items: {$ref: "#/components/schemas/Node"}}
`
	res, err := openapi.Import([]byte(cyclic), openapi.Options{File: "trees.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(res.Notes, "\n")
	if len(res.Tools) != 1 || res.Tools[0].Name != "post_nodes" || !strings.Contains(notes, "trees.yaml:6: POST /nodes has no operationId: named post_nodes") ||
		!strings.Contains(notes, "refers back to itself") {
		t.Errorf("tools %+v\nnotes:\n%s", res.Tools, notes)
	}
	b, _ := json.Marshal(res.Tools[0].Args)
	if _, err := kernel.CompileSchema("t", b); err != nil {
		t.Errorf("the cut schema does not compile: %v\n%s", err, b)
	}

	big := generated(2000)
	if _, err := openapi.Import(big, openapi.Options{File: "big.yaml"}); err == nil || !strings.Contains(err.Error(), "2000 operations chosen, more than 100") || !strings.Contains(err.Error(), "--tags") {
		t.Errorf("2,000 operations: %v", err)
	}
	res, err = openapi.Import(big, openapi.Options{File: "big.yaml", Tags: []string{"t8"}})
	if err != nil || len(res.Tools) != 80 {
		t.Fatalf("one tag of 2,000 operations: %v (%+v)", err, res)
	}
	for doc, says := range map[string]string{
		`{"swagger": "2.0", "info": {"title": "x", "version": "1"}, "paths": {}}`: "OpenAPI 3.0 and 3.1",
		`{"hello": "world"}`: "not an OpenAPI document",
		"openapi: 3.0.3\ninfo: {title: x, version: '1'}\npaths:\n  /a:\n    get: {operationId: a, responses: {'200': {description: ok}}}\n": "names no server",
	} {
		if _, err := openapi.Import([]byte(doc), openapi.Options{File: "x"}); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v, want %q", doc, err, says)
		}
	}
}

// generated is an OpenAPI 3.0 document with n operations over 50 tags,
// each with a path parameter, a query parameter and a $ref'd body.
func generated(n int) []byte {
	var b strings.Builder
	b.WriteString("openapi: 3.0.3\ninfo: {title: Generated, version: '1'}\nservers: [{url: 'https://gen.test/api'}]\n")
	b.WriteString("components:\n  securitySchemes:\n    key: {type: apiKey, in: header, name: X-Key}\n  schemas:\n    Item:\n      type: object\n      required: [name]\n      properties:\n        name: {type: string}\n        size: {type: integer, minimum: 0}\n        tags: {type: array, items: {type: string}}\nsecurity: [{key: []}]\npaths:\n")
	for i := 0; i < n; i += 2 {
		fmt.Fprintf(&b, "  /things%d/{id}:\n", i)
		fmt.Fprintf(&b, "    get:\n      operationId: getThing%d\n      tags: [t%d]\n      parameters:\n        - {name: id, in: path, required: true, schema: {type: string}}\n        - {name: verbose, in: query, schema: {type: boolean}}\n      responses: {'200': {description: ok}}\n", i, i%50)
		fmt.Fprintf(&b, "    put:\n      operationId: putThing%d\n      tags: [t%d]\n      parameters:\n        - {name: id, in: path, required: true, schema: {type: string}}\n      requestBody:\n        required: true\n        content:\n          application/json:\n            schema: {$ref: '#/components/schemas/Item'}\n      responses: {'200': {description: ok}}\n", i+1, i%50)
	}
	return []byte(b.String())
}

// BenchmarkImport2000: importing a 2,000-operation document whole.
func BenchmarkImport2000(b *testing.B) {
	doc := generated(2000)
	for b.Loop() {
		res, err := openapi.Import(doc, openapi.Options{File: "big.yaml", Max: -1})
		if err != nil || len(res.Tools) != 2000 {
			b.Fatalf("%v %d", err, len(res.Tools))
		}
	}
}
