package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/internal/config/names"
)

// `kernel mcp import FILE` reads the mcpServers format every MCP client
// shares — Claude Desktop's claude_desktop_config.json, Claude Code's
// .mcp.json, Cursor's mcp.json (VS Code's "servers" too) — and writes
// tools.mcp entries for it: stdio servers with the grants their command
// line shows they need, streamable HTTP servers with their headers.
// Secrets never move into the file: an env value or a header credential
// becomes the name of a variable the kernel reads from its environment.
// Tiers are left to the operator (every tool is side_effecting until
// tiers names it), and said so.

// mcpClientFile is the mcpServers format.
type mcpClientFile struct {
	MCPServers map[string]json.RawMessage `json:"mcpServers"`
	Servers    map[string]json.RawMessage `json:"servers"` // VS Code's .vscode/mcp.json
}

// mcpClientServer is one server of it. Fields the kernel has no use for
// (autoApprove, alwaysAllow, ...) are reported, not imported.
type mcpClientServer struct {
	Type     string            `json:"type"`
	Command  string            `json:"command"`
	Args     []string          `json:"args"`
	Env      map[string]string `json:"env"`
	Cwd      string            `json:"cwd"`
	URL      string            `json:"url"`
	Headers  map[string]string `json:"headers"`
	Disabled bool              `json:"disabled"`
}

// importedServer is one tools.mcp entry as import writes it.
type importedServer struct {
	Name    string            `yaml:"name"`
	Command []string          `yaml:"command,flow,omitempty"`
	Env     []string          `yaml:"env,flow,omitempty"`
	Dir     string            `yaml:"dir,omitempty"`
	Grant   *importedGrant    `yaml:"grant,flow,omitempty"`
	URL     string            `yaml:"url,omitempty"`
	Headers map[string]string `yaml:"headers,omitempty"`
	// notes say what the operator must do or decide; they are written as
	// comments in the entry and on stderr.
	notes []string
	from  string
	// usedEnv are the variables credentials moved to (secretEnv).
	usedEnv map[string]bool
}

type importedGrant struct {
	FS  []importedFS `yaml:"fs,omitempty"`
	Net *importedNet `yaml:"net,omitempty"`
}

type importedFS struct {
	Path string `yaml:"path"`
	Mode string `yaml:"mode"`
}

type importedNet struct {
	Connect []int `yaml:"connect,flow"`
}

// baseEnv is the environment every imported stdio server gets, as MCP
// clients give it to theirs: a server looks its interpreter up on PATH.
var baseEnv = []string{"PATH", "HOME"}

// downloaders start a server by downloading it first: they need their
// cache read-write and HTTPS at every start.
var downloaders = map[string]string{
	"npx":  "~/.npm",
	"bunx": "~/.bun/install/cache",
	"uvx":  "~/.cache/uv",
	"pipx": "~/.local/pipx",
}

// envRef matches ${NAME} and ${NAME:-default} (Claude Code's expansion).
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}`)

// secretHeader matches a header whose literal value is a credential.
var secretHeader = regexp.MustCompile(`(?i)auth|token|key|secret|cookie|session|password`)

// importMCP reads an mcpServers file and returns the entries for it, in
// name order, and the servers it could not import with why.
func importMCP(path, workspace string) (entries []importedServer, skipped []string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var f mcpClientFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, nil, fmt.Errorf("%s: not an mcpServers file: %w", path, err)
	}
	servers, key := f.MCPServers, "mcpServers"
	if servers == nil {
		servers, key = f.Servers, "servers"
	}
	if len(servers) == 0 {
		return nil, nil, fmt.Errorf("%s: no servers (the file has no \"mcpServers\" object, or it is empty)", path)
	}
	keys := make([]string, 0, len(servers))
	for k := range servers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	used := map[string]bool{}
	for _, k := range keys {
		var s mcpClientServer
		dec := json.NewDecoder(bytes.NewReader(servers[k]))
		if err := dec.Decode(&s); err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %s", k, jsonFieldError(key+"."+k, err)))
			continue
		}
		e, why := importServer(k, s, workspace)
		if why != "" {
			skipped = append(skipped, k+": "+why)
			continue
		}
		if used[e.Name] {
			skipped = append(skipped, fmt.Sprintf("%s: its kernel name %q is taken by another server of the file", k, e.Name))
			continue
		}
		used[e.Name] = true
		e.from = fmt.Sprintf("%s.%s", key, k)
		e.notes = append(e.notes, unknownFields(servers[k])...)
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b importedServer) int { return strings.Compare(a.Name, b.Name) })
	return entries, skipped, nil
}

// importServer turns one server into an entry, or says why it cannot.
func importServer(key string, s mcpClientServer, workspace string) (importedServer, string) {
	e := importedServer{Name: kernelServerName(key)}
	if e.Name != key {
		e.notes = append(e.notes, fmt.Sprintf("named %s: %q is not a server name the kernel takes ([a-z][a-z0-9_-]{0,31}); its tools are %s.<tool>", e.Name, key, e.Name))
	}
	if s.Disabled {
		e.notes = append(e.notes, "disabled in the file; imported all the same: remove the entry to leave it out")
	}
	typ := strings.ToLower(s.Type)
	switch {
	case typ == "sse":
		return e, "an SSE server (type: sse): the kernel speaks stdio and streamable HTTP; if the server also serves streamable HTTP (most do, at /mcp), add it with url"
	case s.URL != "" || typ == "http" || typ == "streamable-http" || typ == "streamablehttp":
		if s.URL == "" {
			return e, "an HTTP server without a url"
		}
		return importHTTP(e, s)
	case s.Command == "":
		return e, "neither a command nor a url"
	}
	// The program is expanded here (the kernel checks and protects the
	// files a command runs, so it names them itself); ${VAR} in an
	// argument stays a reference, ${env:VAR}, which the kernel fills from
	// its environment at each start, as the client did: a credential
	// passed as ${GITHUB_TOKEN} is never written into the file.
	prog, missing := expandNow(s.Command)
	if missing != "" {
		return e, fmt.Sprintf("its command uses ${%s}, which is not set here: set it and import again", missing)
	}
	if prog != s.Command {
		e.notes = append(e.notes, fmt.Sprintf("command %q was expanded from this environment", s.Command))
	}
	args := make([]string, len(s.Args))
	for i, a := range s.Args {
		args[i] = envRef.ReplaceAllStringFunc(a, func(m string) string {
			sub := envRef.FindStringSubmatch(m)
			if sub[2] != "" {
				e.notes = append(e.notes, fmt.Sprintf("argument %d: ${%s:-…} has a default the kernel does not apply: %s must be set", i+1, sub[1], sub[1]))
			} else {
				e.notes = append(e.notes, fmt.Sprintf("argument %d uses ${%s}: set %s in the kernel's environment (the entry says ${env:%s})", i+1, sub[1], sub[1], sub[1]))
			}
			return "${env:" + sub[1] + "}"
		})
	}
	argv := append([]string{prog}, e.secretArgs(args)...)
	for i, v := range argv {
		if workspace != "" && filepath.Clean(v) == filepath.Clean(workspace) {
			argv[i] = "{workspace}"
		}
	}
	e.Command = argv
	if s.Cwd != "" {
		e.Dir = s.Cwd
	}
	e.Env = append(e.Env, baseEnv...)
	envNames := make([]string, 0, len(s.Env))
	for n := range s.Env {
		envNames = append(envNames, n)
	}
	slices.Sort(envNames)
	for _, n := range envNames {
		if !slices.Contains(e.Env, n) {
			e.Env = append(e.Env, n)
		}
		v := s.Env[n]
		m := envRef.FindStringSubmatch(v)
		switch {
		case m != nil && m[0] == v && m[1] == n:
			// ${NAME} for NAME: what the kernel does anyway.
		case m != nil && m[0] == v:
			e.notes = append(e.notes, fmt.Sprintf("env %s came from ${%s}: set %s in the kernel's environment (the kernel passes variables by name, never renamed)", n, m[1], n))
		default:
			// A value in the file (perhaps a key) is not copied: values
			// come from the environment, never from kernel.yaml.
			e.notes = append(e.notes, fmt.Sprintf("env %s has a value in the file, not copied: export %s before starting the kernel", n, n))
		}
	}
	e.Grant = stdioGrant(argv, &e)
	return e, ""
}

// stdioGrant is what a stdio server needs beyond the default grant (its
// program and the files its command names, read-only): a downloader's
// cache and HTTPS, and the directories its arguments name (read-only: the
// operator makes one rw if the server writes there).
func stdioGrant(argv []string, e *importedServer) *importedGrant {
	g := &importedGrant{}
	prog := filepath.Base(argv[0])
	if cache, ok := downloaders[prog]; ok {
		g.FS = append(g.FS, importedFS{Path: cache, Mode: "rw"})
		g.Net = &importedNet{Connect: []int{443}}
		e.notes = append(e.notes, fmt.Sprintf("%s downloads the server at every start, so it gets %s read-write and HTTPS (port 443, every host); installing the package and naming its file in command starts it offline, pinned, with no network", prog, cache))
		// The grant names a directory that must exist; the downloader
		// would make its cache on its first run outside a sandbox.
		if dir := expandHome(cache); dir != cache {
			if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
				if err := os.MkdirAll(dir, 0o700); err != nil {
					e.notes = append(e.notes, fmt.Sprintf("%s does not exist and could not be created (%v): create it before starting the kernel", cache, err))
				} else {
					e.notes = append(e.notes, fmt.Sprintf("created %s (%s's cache, missing here): a grant names a directory that exists", cache, prog))
				}
			}
		}
	}
	for _, a := range argv[1:] {
		if strings.Contains(a, "${") {
			continue
		}
		p := expandHome(a)
		if !filepath.IsAbs(p) {
			continue
		}
		fi, err := os.Stat(p)
		switch {
		case err == nil && fi.IsDir():
			g.FS = append(g.FS, importedFS{Path: a, Mode: "ro"})
			e.notes = append(e.notes, fmt.Sprintf("%s is granted read-only: make it mode: rw if the server should write there", a))
		case errors.Is(err, os.ErrNotExist):
			e.notes = append(e.notes, fmt.Sprintf("%s does not exist here, so nothing is granted for it: install or create it before starting the kernel (a directory the server needs goes in grant.fs then, {path: %s, mode: ro}; a file the command names is readable without a grant)", a, a))
		}
	}
	if len(g.FS) == 0 && g.Net == nil {
		return nil
	}
	return g
}

// importHTTP fills a streamable HTTP server's entry: ${NAME} in a header
// becomes the kernel's ${env:NAME}, and a credential written in the file
// becomes a variable to export.
func importHTTP(e importedServer, s mcpClientServer) (importedServer, string) {
	// ${VAR} stays a reference the kernel fills at each request, and a
	// credential in the query or the user information moves to one.
	u := envRef.ReplaceAllStringFunc(s.URL, func(m string) string {
		sub := envRef.FindStringSubmatch(m)
		e.notes = append(e.notes, fmt.Sprintf("url uses ${%s}: set %s in the kernel's environment (the entry says ${env:%s})", sub[1], sub[1], sub[1]))
		return "${env:" + sub[1] + "}"
	})
	if v, ok := e.secretURL(u, "the url"); ok {
		u = v
	}
	e.URL = u
	names := make([]string, 0, len(s.Headers))
	for h := range s.Headers {
		names = append(names, h)
	}
	slices.Sort(names)
	for _, h := range names {
		v := s.Headers[h]
		switch {
		case envRef.MatchString(v):
			e.Headers = mapSet(e.Headers, h, envRef.ReplaceAllStringFunc(v, func(m string) string {
				sub := envRef.FindStringSubmatch(m)
				if sub[2] != "" {
					e.notes = append(e.notes, fmt.Sprintf("header %s: ${%s:-…} has a default the kernel does not apply: %s must be set", h, sub[1], sub[1]))
				}
				return "${env:" + sub[1] + "}"
			}))
		case secretHeader.MatchString(h):
			env := envVarName("MCP_" + e.Name + "_" + h)
			e.Headers = mapSet(e.Headers, h, "${env:"+env+"}")
			e.notes = append(e.notes, fmt.Sprintf("header %s held a credential in the file, not copied: export %s with its value", h, env))
		default:
			e.Headers = mapSet(e.Headers, h, v)
		}
	}
	if strings.HasPrefix(e.URL, "http://") && !isLoopbackURL(e.URL) {
		e.notes = append(e.notes, "the url is plain http to another host: its headers travel unencrypted")
	}
	return e, ""
}

func mapSet(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

// expandNow expands ${NAME} and ${NAME:-default} from this environment, as
// Claude Code does; missing names an unset variable without a default.
func expandNow(s string) (out, missing string) {
	out = envRef.ReplaceAllStringFunc(s, func(m string) string {
		sub := envRef.FindStringSubmatch(m)
		if v, ok := os.LookupEnv(sub[1]); ok {
			return v
		}
		if strings.Contains(m, ":-") {
			return sub[2]
		}
		if missing == "" {
			missing = sub[1]
		}
		return m
	})
	return out, missing
}

// kernelServerName is key as a server name the kernel takes: lower case,
// other characters as "-", starting with a letter, at most 32 long.
func kernelServerName(key string) string {
	if names.Namespace.Check(key) == nil {
		return key
	}
	var b strings.Builder
	for _, r := range strings.ToLower(key) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	n := strings.Trim(b.String(), "-_")
	if n == "" || n[0] < 'a' || n[0] > 'z' {
		n = "mcp-" + n
	}
	if len(n) > 32 {
		n = strings.TrimRight(n[:32], "-_")
	}
	return n
}

// envVarName is s as an environment variable name: upper case, other
// characters as "_".
func envVarName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(s) {
		if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func isLoopbackURL(u string) bool {
	rest := strings.TrimPrefix(u, "http://")
	host := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		host = rest[:i]
	}
	if i := strings.LastIndex(host, ":"); i >= 0 && !strings.HasSuffix(host, "]") {
		host = host[:i]
	}
	return host == "localhost" || strings.HasPrefix(host, "127.") || host == "[::1]"
}

// unknownFields names the fields of a server the import left out.
func unknownFields(raw json.RawMessage) []string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	known := map[string]bool{"type": true, "command": true, "args": true, "env": true, "cwd": true, "url": true, "headers": true, "disabled": true}
	var out []string
	for k := range m {
		if !known[k] {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil
	}
	slices.Sort(out)
	return []string{fmt.Sprintf("not imported: %s (approvals and tool choices are the policy's: docs/policy.md)", strings.Join(out, ", "))}
}

// importYAML is the entries as a YAML list at column 0, each with its notes
// and the tiers reminder as comments.
func importYAML(entries []importedServer, file string) (string, error) {
	return yamlListItems(entries, func(e importedServer) []string {
		c := append([]string{fmt.Sprintf("imported from %s (%s)", filepath.Base(file), e.from)}, e.notes...)
		return append(c,
			"tiers: not set, so every tool is side_effecting; name the read-only ones",
			"(tiers: {tool: read_only}) once `kernel mcp ls` has listed them")
	})
}

// errFlowStyle is a configuration whose tools or tools.mcp is written in
// flow style ({...} or [...]), which import does not edit.
var errFlowStyle = errors.New("is written in flow style ({...} or [...]); add the entries by hand (they are printed above)")

// insertMCP returns the configuration src with items (a YAML list at
// column 0) appended to tools.mcp, the rest of the text as it was: the
// comments and layout of a hand-written file stay. existing lists the
// server names already there.
func insertMCP(src []byte, items string) (out []byte, existing []string, err error) {
	return insertToolsList(src, "mcp", items)
}

// insertToolsList is insertMCP for the list tools.<key> (mcp, http).
func insertToolsList(src []byte, key, items string) (out []byte, existing []string, err error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, nil, err
	}
	lines := strings.SplitAfter(string(src), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	if n := len(lines); n > 0 && !strings.HasSuffix(lines[n-1], "\n") {
		lines[n-1] += "\n"
	}
	insert := func(at int, text string) []byte {
		res := append(append(slices.Clone(lines[:at]), text), lines[at:]...)
		return []byte(strings.Join(res, ""))
	}
	if len(doc.Content) == 0 {
		return insert(len(lines), "tools:\n  "+key+":\n"+indentText(items, 4)), nil, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, nil, errors.New("the file is not a YAML mapping")
	}
	tools, toolsEnd := mappingValue(root, "tools", len(lines))
	if tools == nil {
		return insert(backOver(lines, len(lines)), "tools:\n  "+key+":\n"+indentText(items, 4)), nil, nil
	}
	if tools.Style&yaml.FlowStyle != 0 || tools.Kind != yaml.MappingNode {
		return nil, nil, fmt.Errorf("tools %w", errFlowStyle)
	}
	ind := tools.Content[0].Column - 1
	list, listEnd := mappingValue(tools, key, toolsEnd)
	switch {
	case list == nil:
		return insert(backOver(lines, toolsEnd), strings.Repeat(" ", ind)+key+":\n"+indentText(items, ind+2)), nil, nil
	case list.Kind == yaml.ScalarNode && list.Tag == "!!null":
		return insert(backOver(lines, listEnd), indentText(items, ind+2)), nil, nil
	case list.Kind != yaml.SequenceNode || list.Style&yaml.FlowStyle != 0:
		return nil, nil, fmt.Errorf("tools.%s %w", key, errFlowStyle)
	}
	for _, it := range list.Content {
		if n, _ := mappingValue(it, "name", 0); n != nil {
			existing = append(existing, n.Value)
		}
	}
	dash := list.Content[0].Column - 3 // "- " before the item's first key
	if dash < 0 {
		dash = ind
	}
	return insert(backOver(lines, listEnd), indentText(items, dash)), existing, nil
}

// mappingValue returns the value of key in the mapping m and the line
// (0-based) where it ends: the next key's line, or end.
func mappingValue(m *yaml.Node, key string, end int) (*yaml.Node, int) {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil, end
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != key {
			continue
		}
		if i+2 < len(m.Content) {
			end = m.Content[i+2].Line - 1
		}
		return m.Content[i+1], end
	}
	return nil, end
}

// backOver moves an insertion point up over the blank lines and comments
// before it, which belong to what follows.
func backOver(lines []string, at int) int {
	for at > 0 {
		t := strings.TrimSpace(lines[at-1])
		if t != "" && !strings.HasPrefix(t, "#") {
			break
		}
		at--
	}
	return at
}

func indentText(s string, n int) string {
	pad := strings.Repeat(" ", n)
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if strings.TrimSpace(l) != "" {
			b.WriteString(pad)
		}
		b.WriteString(l)
	}
	return b.String()
}

// mcpImport is `kernel mcp import FILE [--write CONFIG]`.
func mcpImport(cf *commonFlags, env *cliEnv, file, write string) error {
	if write != "" && len(cf.config) == 0 {
		if _, err := os.Stat(write); err == nil {
			cf.config = stringList{write} // its workspace is the one {workspace} stands for
		}
	}
	cfg, err := cf.load()
	if err != nil {
		return err
	}
	ws := ""
	if cfg.Workspace != "" {
		ws = cfg.path(cfg.Workspace)
	}
	entries, skipped, err := importMCP(file, ws)
	if err != nil {
		return err
	}
	for _, s := range skipped {
		fmt.Fprintf(env.stderr, "skipped %s\n", s)
	}
	if len(entries) == 0 {
		return fmt.Errorf("%s: no server could be imported", file)
	}
	text, err := importYAML(entries, file)
	if err != nil {
		return err
	}
	for _, e := range entries {
		for _, n := range e.notes {
			fmt.Fprintf(env.stderr, "%s: %s\n", e.Name, n)
		}
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name
	}
	tiers := "tiers are yours to set: every tool of these servers is side_effecting until its entry's tiers names it (`kernel mcp ls` lists the tools and their hints)"
	if write == "" {
		fmt.Fprint(env.stdout, "tools:\n  mcp:\n"+indentText(text, 4))
		fmt.Fprintf(env.stderr, "%s; add them to tools.mcp in your kernel.yaml, or run again with --write FILE\n", tiers)
		return nil
	}
	src, err := os.ReadFile(write)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	out, existing, err := insertMCP(src, text)
	if err != nil {
		if errors.Is(err, errFlowStyle) {
			fmt.Fprint(env.stdout, indentText(text, 4))
		}
		return fmt.Errorf("%s: %w", write, err)
	}
	if dup := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !slices.Contains(existing, n) }); len(dup) > 0 {
		return fmt.Errorf("%s already has MCP servers named %s: remove them from it, or from %s, and import again", write, strings.Join(dup, ", "), file)
	}
	// What is written must load: the same checks as every start.
	abs, err := filepath.Abs(write)
	if err != nil {
		return err
	}
	check := &Config{}
	if err := check.layer("(embedded defaults)", filepath.Dir(abs), defaultsYAML); err != nil {
		return err
	}
	if err := check.layer(write, filepath.Dir(abs), out); err != nil {
		return fmt.Errorf("the imported entries would make %s invalid, so it is left as it was: %w", write, err)
	}
	if err := writePrivateFile(write, out); err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "added %s to tools.mcp in %s; %s\n", strings.Join(names, ", "), write, tiers)
	return nil
}

// jsonFieldError says what was wrong with a server's entry in the file's
// terms (its path and the JSON types), not the decoder's Go ones.
func jsonFieldError(at string, err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("%s.%s: want a JSON %s, found a %s", at, te.Field, jsonKind(te.Type.Kind()), te.Value)
	}
	return err.Error()
}

func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "string"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	case reflect.Bool:
		return "boolean"
	default:
		return "number"
	}
}
