package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/egress"
	"github.com/agentkernel/agentkernel/plugins/declared"
	"github.com/agentkernel/agentkernel/plugins/declared/openapi"
)

const toolsImportUsage = `Usage: kernel tools import openapi SPEC [flags]

Reads an OpenAPI 3.0 or 3.1 document (JSON or YAML; a file, or an http(s)
URL) and makes one declared HTTP tool (tools.http) per operation: named
after its operationId, its arguments the operation's parameters and JSON
request body, its tier from its method, its credentials ${env:NAME}
references to export. Prints the entries, or adds them to CONFIG with
--write (its comments and layout kept); --dry-run shows what --write would
add and checks it, writing nothing. See docs/tools.md.`

// maxSpecBytes bounds a document read by URL.
const maxSpecBytes = 64 << 20

func toolsImport(ctx context.Context, args []string, env *cliEnv) error {
	if len(args) == 0 || args[0] != "openapi" {
		fmt.Fprintln(env.stderr, toolsImportUsage)
		return usageError("tools import takes the kind of document first: kernel tools import openapi SPEC")
	}
	fs := newFlagSet("tools import openapi", "SPEC", env.stderr)
	var cf commonFlags
	cf.register(fs)
	var ops, tags, networks stringList
	fs.Var(&ops, "operations", "import only these operationIds (comma-separated, repeatable)")
	fs.Var(&tags, "tags", "import only the operations with one of these tags (comma-separated, repeatable)")
	fs.Var(&networks, "networks", "write egress.networks: the internal `CIDR` ranges the API is on (comma-separated, repeatable)")
	prefix := fs.String("prefix", "", "put `P` before every tool name (default: the document's file name and a dot; \"-\" for none)")
	base := fs.String("server", "", "the API's `URL`, instead of the document's first server")
	security := fs.String("security", "", "the security scheme to use where an operation accepts several")
	maxOps := fs.Int("max", openapi.DefaultMax, "the most operations one import takes (-1: no limit)")
	write := fs.String("write", "", "add the entries to the tools.http of configuration `FILE` instead of printing them")
	dry := fs.Bool("dry-run", false, "with --write: show what would be added and check it, write nothing")
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("tools import openapi takes one SPEC (a file or an http(s) URL)")
	}
	spec, name, err := readSpec(ctx, pos[0])
	if err != nil {
		return err
	}
	p := *prefix
	switch p {
	case "":
		p = kernelServerName(strings.TrimSuffix(name, path.Ext(name))) + "."
	case "-":
		p = ""
	default:
		p = strings.TrimSuffix(p, ".") + "."
	}
	for _, n := range split(networks) {
		if _, err := netip.ParsePrefix(n); err != nil {
			return usageError("--networks: %q is not a CIDR prefix", n)
		}
	}
	start := time.Now()
	res, err := openapi.Import(spec, openapi.Options{File: name, Operations: split(ops), Tags: split(tags), Prefix: p,
		BaseURL: *base, Max: *maxOps, Security: *security, Networks: split(networks)})
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	for _, n := range res.Notes {
		fmt.Fprintln(env.stderr, "note: "+n)
	}
	text, err := importedHTTPYAML(res)
	if err != nil {
		return err
	}
	names := make([]string, len(res.Tools))
	for i, t := range res.Tools {
		names[i] = t.Name
	}
	summary := fmt.Sprintf("%d tools from %s (OpenAPI %s, %q) in %s", len(res.Tools), name, res.Version, res.Title, elapsed.Round(time.Millisecond))
	if *write == "" {
		fmt.Fprint(env.stdout, "tools:\n  http:\n"+indentText(text, 4))
		fmt.Fprintln(env.stderr, summary+"; add them to tools.http in your kernel.yaml, or run again with --write FILE")
		printExports(env.stderr, res.Env)
		return nil
	}
	src, err := os.ReadFile(*write)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	out, _, err := insertToolsList(src, "http", text)
	if err != nil {
		if errors.Is(err, errFlowStyle) {
			fmt.Fprint(env.stdout, indentText(text, 4))
		}
		return fmt.Errorf("%s: %w", *write, err)
	}
	// What is written must load: the schema, and the entries decode.
	abs, err := filepath.Abs(*write)
	if err != nil {
		return err
	}
	check := &Config{}
	if err := check.layer("(embedded defaults)", filepath.Dir(abs), defaultsYAML); err != nil {
		return err
	}
	if err := check.layer(*write, filepath.Dir(abs), out); err != nil {
		return fmt.Errorf("the imported entries would make %s invalid, so it is left as it was: %w", *write, err)
	}
	dc, err := check.declaredConfig()
	if err != nil {
		return fmt.Errorf("the imported entries would make %s invalid, so it is left as it was: %w", *write, err)
	}
	var dup []string
	seen := map[string]int{}
	for _, h := range dc.HTTP {
		seen[h.Name]++
	}
	for _, n := range names {
		if seen[n] > 1 {
			dup = append(dup, n)
		}
	}
	if len(dup) > 0 {
		return fmt.Errorf("%s already has tools named %s: remove them, or import with another --prefix", *write, strings.Join(dup, ", "))
	}
	if *dry {
		fmt.Fprint(env.stdout, indentText(text, 4))
		fmt.Fprintf(env.stderr, "%s; --dry-run: %s is left as it was (it would load)\n", summary, *write)
		printExports(env.stderr, res.Env)
		return nil
	}
	if err := writePrivateFile(*write, out); err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "%s; added to tools.http in %s\n", summary, *write)
	printExports(env.stderr, res.Env)
	return nil
}

// printExports tells the operator which variables the tools read their
// credentials from: the kernel refuses to start a tool whose variable is
// unset.
func printExports(w io.Writer, envs []openapi.Env) {
	if len(envs) == 0 {
		return
	}
	fmt.Fprintln(w, "export these before starting the kernel (a tool whose variable is unset is refused at load):")
	for _, e := range envs {
		fmt.Fprintf(w, "  export %s=...   # %s (security scheme %s)\n", e.Name, e.How, e.Scheme)
	}
}

// importedHTTPYAML is the tools as a YAML list at column 0, each with a
// comment naming its operation.
func importedHTTPYAML(res *openapi.Result) (string, error) {
	return yamlListItems(res.Tools, func(t openapi.Tool) []string {
		return []string{fmt.Sprintf("imported from %s: operation %s (line %d)", t.OpenAPI, t.Operation, t.Line)}
	})
}

// readSpec reads SPEC: a file, or an http(s) URL fetched through the
// guarded client (its own host only; internal addresses allowed, since the
// operator names the URL, but never a metadata service), bounded in size
// and time. name is what the tools' source calls it.
func readSpec(ctx context.Context, spec string) (data []byte, name string, err error) {
	if !strings.HasPrefix(spec, "http://") && !strings.HasPrefix(spec, "https://") {
		data, err = os.ReadFile(spec)
		return data, filepath.Base(spec), err
	}
	u, err := url.Parse(spec)
	if err != nil || u.Host == "" {
		return nil, "", fmt.Errorf("%q is not a URL", spec)
	}
	client, err := egress.NewClient(egress.Config{Hosts: []string{u.Host}, Networks: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}})
	if err != nil {
		return nil, "", err
	}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, spec, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("fetch %s: %w", spec, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("fetch %s: %s", spec, resp.Status)
	}
	data, err = io.ReadAll(io.LimitReader(resp.Body, maxSpecBytes+1))
	if err != nil {
		return nil, "", fmt.Errorf("fetch %s: %w", spec, err)
	}
	if len(data) > maxSpecBytes {
		return nil, "", fmt.Errorf("fetch %s: the document is larger than %d MiB", spec, maxSpecBytes>>20)
	}
	name = path.Base(u.Path)
	if name == "/" || name == "." || name == "" {
		name = u.Host
	}
	return data, name, nil
}

// split splits comma-separated flag values.
func split(l stringList) []string {
	var out []string
	for _, v := range l {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

var _ = declared.SourceOpenAPI
