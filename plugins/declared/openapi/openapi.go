// Package openapi turns an OpenAPI 3.0 or 3.1 document into declared HTTP
// tools (plugins/declared): one tool per operation, named after its
// operationId, its arguments the operation's parameters and request body
// ($refs resolved, cycles cut), its tier from its method, and its
// security schemes mapped to ${env:NAME} references the operator
// exports. `kernel tools import openapi` writes the result into
// kernel.yaml. The document is parsed by github.com/pb33f/libopenapi
// (RATIONALE.md, "OpenAPI import: libopenapi"); references outside the
// document are not followed.
package openapi

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/pb33f/libopenapi/datamodel"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
	lowbase "github.com/pb33f/libopenapi/datamodel/low/base"
	v3low "github.com/pb33f/libopenapi/datamodel/low/v3"
	"github.com/pb33f/libopenapi/index"
	"github.com/pb33f/libopenapi/utils"
)

// DefaultMax is the most operations one import takes unless Options.Max
// says otherwise: more tools than this crowd the model's context, so a
// larger document is imported a part at a time (--tags, --operations).
const DefaultMax = 100

// Options choose and name what is imported.
type Options struct {
	// File names the document in the entries (their openapi field, and so
	// the tools' source "openapi:<File>") and in messages.
	File string
	// Operations and Tags choose the operations (by operationId, or by
	// tag); none means all.
	Operations, Tags []string
	// Prefix is put before every tool name ("petstore." + operationId);
	// empty: none.
	Prefix string
	// BaseURL replaces the document's first server (needed when it has
	// none, or a relative one).
	BaseURL string
	// Max caps the operations (0: DefaultMax; negative: no cap).
	Max int
	// Security is the security scheme to use where an operation accepts
	// several; empty: the first the operation lists.
	Security string
	// Networks are written into every entry's egress.networks: the
	// internal ranges an API on a private network needs.
	Networks []string
}

// Tool is one tools.http entry, as the import writes it.
type Tool struct {
	Name        string            `yaml:"name"`
	Description string            `yaml:"description"`
	Method      string            `yaml:"method"`
	URL         string            `yaml:"url"`
	Headers     map[string]string `yaml:"headers,omitempty"`
	Body        any               `yaml:"body,omitempty"`
	Args        map[string]any    `yaml:"args"`
	Egress      *Egress           `yaml:"egress,omitempty"`
	OpenAPI     string            `yaml:"openapi"`
	// Operation is the operationId (or what stood for it) and Line where
	// the operation is in the document, for messages.
	Operation string `yaml:"-"`
	Line      int    `yaml:"-"`
}

// Egress is an entry's egress section, when the import writes one.
type Egress struct {
	Networks []string `yaml:"networks,flow"`
}

// Env is a variable the imported tools read a credential from.
type Env struct {
	Name string
	// Scheme is the security scheme it stands for, How what to put in it.
	Scheme, How string
}

// Result is what an import makes of a document.
type Result struct {
	Title   string
	Version string // the document's OpenAPI version
	Tools   []Tool
	Env     []Env
	// Notes say what was changed or left out, with the document's line.
	Notes []string
}

var methods = []string{"get", "put", "post", "delete", "options", "head", "patch"}

// parse builds the OpenAPI 3 model of spec: what libopenapi's
// NewDocumentWithConfiguration and BuildV3Model do, from the layers they
// call (datamodel, low/v3, high/v3) rather than the root package, which
// also links the Swagger 2.0, Arazzo and Overlay models and the
// what-changed comparer, none of which an import uses (RATIONALE.md,
// "OpenAPI import: libopenapi"). The model comes with the errors the
// resolver reported that do not stop the build (circular references);
// a nil model comes with the reason.
func parse(spec []byte) (*v3.Document, error) {
	cfg := &datamodel.DocumentConfiguration{}
	info, err := datamodel.ExtractSpecInfoWithConfig(spec, cfg)
	if err != nil {
		return nil, fmt.Errorf("not an OpenAPI document: %w", err)
	}
	if v := info.Version; !strings.HasPrefix(v, "3.") {
		return nil, fmt.Errorf("OpenAPI %s: the import reads OpenAPI 3.0 and 3.1 (convert a Swagger 2.0 document first)", v)
	}
	if f := info.SpecFormat; f != datamodel.OAS3 && f != datamodel.OAS31 && f != datamodel.OAS32 {
		return nil, fmt.Errorf("not an OpenAPI 3 document (%v)", f)
	}
	low, docErr := v3low.CreateDocumentFromConfig(info, cfg)
	if low == nil {
		return nil, docErr
	}
	errs := utils.UnwrapErrors(docErr)
	for _, e := range errs {
		// Only a circular reference leaves a model worth reading.
		if refErr := (*index.ResolvingError)(nil); errors.As(e, &refErr) && refErr.CircularReference == nil {
			return nil, errors.Join(errs...)
		}
	}
	doc := v3.NewDocument(low)
	doc.Rolodex = low.Index.GetRolodex()
	lowbase.SchemaQuickHashMap.Clear() // the build's hash cache, as BuildV3Model leaves it
	return doc, errors.Join(errs...)
}

// Import reads a document (JSON or YAML) and returns its tools.
func Import(spec []byte, o Options) (*Result, error) {
	m, err := parse(spec)
	if m == nil {
		return nil, fmt.Errorf("%s: %w", o.File, err)
	}
	r := &Result{Version: m.Version}
	if err != nil {
		// Circular references and the like: the model is built, and the
		// schemas' cycles are cut below; say what the parser found.
		for _, e := range splitErrors(err) {
			r.Notes = append(r.Notes, "the document: "+e)
		}
	}
	if m.Info != nil {
		r.Title = m.Info.Title
	}
	base, err := baseURL(m.Servers, o)
	if err != nil {
		return nil, err
	}
	im := &importer{doc: m, opts: o, res: r, envs: map[string]Env{}}
	if m.Paths == nil || m.Paths.PathItems == nil {
		return nil, fmt.Errorf("%s: the document has no paths", o.File)
	}
	var selected []op
	counts := map[string]int{}
	for path, item := range m.Paths.PathItems.FromOldest() {
		for _, meth := range methods {
			operation := item.GetOperations().GetOrZero(meth)
			if operation == nil {
				continue
			}
			for _, tg := range operation.Tags {
				counts[tg]++
			}
			id := operation.OperationId
			line := 0
			if low := operation.GoLow(); low != nil && low.KeyNode != nil {
				line = low.KeyNode.Line
			}
			if id == "" {
				id = meth + strings.NewReplacer("/", "_", "{", "", "}", "").Replace(path)
				im.note(line, "%s %s has no operationId: named %s", strings.ToUpper(meth), path, id)
			}
			if !chosen(o, id, operation.Tags) {
				continue
			}
			selected = append(selected, op{path: path, method: meth, item: item, op: operation, id: id, line: line})
		}
	}
	for _, want := range o.Operations {
		if !slices.ContainsFunc(selected, func(s op) bool { return s.id == want }) {
			return nil, fmt.Errorf("%s: no operation %q (the document's operationIds are what --operations takes)", o.File, want)
		}
	}
	if len(selected) == 0 {
		return nil, fmt.Errorf("%s: no operation chosen (tags: %s)", o.File, tagList(counts))
	}
	max := o.Max
	if max == 0 {
		max = DefaultMax
	}
	if max > 0 && len(selected) > max {
		return nil, fmt.Errorf("%s: %d operations chosen, more than %d tools a model can be offered usefully: choose with --tags (%s) or --operations, or raise --max",
			o.File, len(selected), max, tagList(counts))
	}
	used := map[string]bool{}
	for _, s := range selected {
		t, err := im.tool(s, base)
		if err != nil {
			im.note(s.line, "%s left out: %v", s.id, err)
			continue
		}
		if used[t.Name] {
			im.note(s.line, "%s left out: its tool name %s is taken by another operation", s.id, t.Name)
			continue
		}
		used[t.Name] = true
		r.Tools = append(r.Tools, t)
	}
	if len(r.Tools) == 0 {
		return nil, fmt.Errorf("%s: no operation could be imported:\n  %s", o.File, strings.Join(r.Notes, "\n  "))
	}
	for _, e := range im.envs {
		r.Env = append(r.Env, e)
	}
	sort.Slice(r.Env, func(i, j int) bool { return r.Env[i].Name < r.Env[j].Name })
	return r, nil
}

type op struct {
	path, method, id string
	item             *v3.PathItem
	op               *v3.Operation
	line             int
}

func chosen(o Options, id string, tags []string) bool {
	if len(o.Operations) > 0 && !slices.Contains(o.Operations, id) {
		return false
	}
	if len(o.Tags) > 0 && !slices.ContainsFunc(tags, func(t string) bool { return slices.Contains(o.Tags, t) }) {
		return false
	}
	return true
}

func tagList(counts map[string]int) string {
	if len(counts) == 0 {
		return "the document has no tags"
	}
	var out []string
	for t, n := range counts {
		out = append(out, fmt.Sprintf("%s %d", t, n))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func splitErrors(err error) []string {
	var out []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, splitErrors(e)...)
		}
		return out
	}
	return []string{err.Error()}
}

// baseURL is the URL operations' paths are appended to: --base-url, or the
// document's first server with its variables' defaults.
func baseURL(servers []*v3.Server, o Options) (string, error) {
	raw := o.BaseURL
	if raw == "" {
		if len(servers) == 0 {
			return "", fmt.Errorf("%s: the document names no server: give the API's URL with --server", o.File)
		}
		raw = servers[0].URL
		if servers[0].Variables != nil {
			for name, v := range servers[0].Variables.FromOldest() {
				raw = strings.ReplaceAll(raw, "{"+name+"}", v.Default)
			}
		}
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s: the server URL %q is not an absolute http(s) URL: give the API's URL with --server", o.File, raw)
	}
	return strings.TrimSuffix(raw, "/"), nil
}

// importer holds what one import collects.
type importer struct {
	doc  *v3.Document
	opts Options
	res  *Result
	envs map[string]Env
}

func (im *importer) note(line int, format string, a ...any) {
	where := im.opts.File
	if line > 0 {
		where = fmt.Sprintf("%s:%d", where, line)
	}
	im.res.Notes = append(im.res.Notes, where+": "+fmt.Sprintf(format, a...))
}

var nameRE = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// toolName is prefix+id as a tool name: other characters as _, at most 64
// (a longer one keeps its start and a hash of the whole).
func toolName(prefix, id string) string {
	n := nameRE.ReplaceAllString(prefix+id, "_")
	if len(n) > 64 {
		sum := sha256.Sum256([]byte(n))
		n = n[:55] + "_" + hex.EncodeToString(sum[:4])
	}
	return n
}

// tool makes the entry of one operation.
func (im *importer) tool(s op, base string) (Tool, error) {
	t := Tool{Name: toolName(im.opts.Prefix, s.id), Method: strings.ToUpper(s.method), OpenAPI: im.opts.File, Operation: s.id, Line: s.line}
	t.Description = describe(s.op.Summary, s.op.Description, s.method, s.path)
	props := map[string]any{}
	var required []string
	path := s.path
	var query []string
	headers := map[string]string{}
	params := map[string]*v3.Parameter{}
	var order []string
	for _, p := range append(append([]*v3.Parameter{}, s.item.Parameters...), s.op.Parameters...) {
		if p == nil {
			continue
		}
		key := p.In + ":" + p.Name
		if _, seen := params[key]; !seen {
			order = append(order, key)
		}
		params[key] = p // the operation's overrides the path's
	}
	for _, key := range order {
		p := params[key]
		name := p.Name
		if _, taken := props[name]; taken {
			name = p.In + "_" + p.Name
		}
		if strings.ContainsAny(name, "{} \t") {
			return t, fmt.Errorf("parameter %q: its name cannot be a placeholder", p.Name)
		}
		sch := im.schema(p.Schema, s.line)
		if p.Description != "" {
			sch["description"] = cutText(p.Description, 300)
		}
		req := p.Required != nil && *p.Required
		switch p.In {
		case "path":
			if !strings.Contains(path, "{"+p.Name+"}") {
				return t, fmt.Errorf("path parameter %s is not in the path %s", p.Name, s.path)
			}
			path = strings.ReplaceAll(path, "{"+p.Name+"}", "{"+name+"}")
			req = true
		case "query":
			query = append(query, url.QueryEscape(p.Name)+"={"+name+"}")
		case "header":
			headers[p.Name] = "{" + name + "}"
		default:
			im.note(s.line, "%s: parameter %s in %s left out (the import maps path, query and header parameters)", s.id, p.Name, p.In)
			continue
		}
		props[name] = sch
		if req {
			required = append(required, name)
		}
	}
	if rb := s.op.RequestBody; rb != nil && rb.Content != nil {
		var media *v3.MediaType
		var types []string
		for ct, mt := range rb.Content.FromOldest() {
			types = append(types, ct)
			if media == nil && (ct == "application/json" || strings.HasSuffix(ct, "+json")) {
				media = mt
			}
		}
		if media == nil {
			return t, fmt.Errorf("its request body is %s: the import sends JSON bodies only", strings.Join(types, ", "))
		}
		name := "body"
		if _, taken := props[name]; taken {
			name = "request_body"
		}
		sch := im.schema(media.Schema, s.line)
		if rb.Description != "" {
			sch["description"] = cutText(rb.Description, 300)
		}
		props[name] = sch
		if rb.Required != nil && *rb.Required {
			required = append(required, name)
		}
		t.Body = "{" + name + "}"
	}
	if err := im.security(s, headers, &query); err != nil {
		return t, err
	}
	t.URL = base + path
	if len(query) > 0 {
		t.URL += "?" + strings.Join(query, "&")
	}
	if len(headers) > 0 {
		t.Headers = headers
	}
	args := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		sort.Strings(required)
		args["required"] = required
	}
	t.Args = args
	if len(im.opts.Networks) > 0 {
		t.Egress = &Egress{Networks: im.opts.Networks}
	}
	return t, nil
}

func describe(summary, desc, method, path string) string {
	var parts []string
	for _, s := range []string{summary, desc} {
		s = strings.TrimSpace(s)
		if s != "" && !slices.Contains(parts, s) {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		parts = []string{strings.ToUpper(method) + " " + path}
	}
	return cutText(strings.Join(parts, "\n\n"), 1000)
}

func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// security maps the operation's first security requirement (its own, or
// the document's) to ${env:NAME} references in headers or the query.
func (im *importer) security(s op, headers map[string]string, query *[]string) error {
	reqs := s.op.Security
	if reqs == nil {
		reqs = im.doc.Security
	}
	if len(reqs) == 0 || reqs[0] == nil || reqs[0].Requirements == nil || im.doc.Components == nil || im.doc.Components.SecuritySchemes == nil {
		return nil
	}
	req := reqs[0]
	if im.opts.Security != "" {
		for _, r := range reqs {
			if r != nil && r.Requirements != nil {
				if _, ok := r.Requirements.Get(im.opts.Security); ok {
					req = r
					break
				}
			}
		}
	}
	for name := range req.Requirements.FromOldest() {
		sch := im.doc.Components.SecuritySchemes.GetOrZero(name)
		if sch == nil {
			return fmt.Errorf("security scheme %q is not in components.securitySchemes", name)
		}
		env := envName(im.opts.Prefix, name)
		ref := "${env:" + env + "}"
		switch {
		case sch.Type == "apiKey" && sch.In == "header":
			headers[sch.Name] = ref
			im.env(env, name, "the API key sent as header "+sch.Name)
		case sch.Type == "apiKey" && sch.In == "query":
			*query = append(*query, url.QueryEscape(sch.Name)+"="+ref)
			im.env(env, name, "the API key sent as query parameter "+sch.Name)
		case sch.Type == "http" && strings.EqualFold(sch.Scheme, "bearer"):
			headers["Authorization"] = "Bearer " + ref
			im.env(env, name, "the bearer token")
		case sch.Type == "http" && strings.EqualFold(sch.Scheme, "basic"):
			headers["Authorization"] = "Basic " + ref
			im.env(env, name, "base64 of user:password (printf 'user:password' | base64)")
		case sch.Type == "oauth2" || sch.Type == "openIdConnect":
			headers["Authorization"] = "Bearer " + ref
			im.env(env, name, "an access token obtained outside the kernel ("+sch.Type+": the kernel does not run the flow)")
		default:
			return fmt.Errorf("security scheme %s (%s %s) is not one the import maps", name, sch.Type, sch.In)
		}
	}
	return nil
}

func (im *importer) env(name, scheme, how string) {
	im.envs[name] = Env{Name: name, Scheme: scheme, How: how}
}

// envName is the variable of a security scheme: PREFIX_SCHEME in upper
// case, other characters as _.
func envName(prefix, scheme string) string {
	s := strings.TrimSuffix(prefix, ".") + "_" + scheme
	s = strings.Trim(strings.ToUpper(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(s, "_")), "_")
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		s = "API_" + s
	}
	return s
}

var errNoSchema = errors.New("no schema")
