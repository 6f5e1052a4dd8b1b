// Package names holds the syntax rules of the kernel's names (tools,
// plugins, modules, hooks), read from the patterns the JSON Schemas under
// schemas/ state. It is apart from internal/config so that what a tool
// plugin links for them (through the Go SDK, package sdk) is this package and the
// schemas, not the YAML decoder.
package names

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/agentkernel/agentkernel/schemas"
)

// A Rule is the syntax of one kind of name, read from the pattern a
// schema under schemas/ states for it, so the schema is the only place
// the limit is written. The schema is read on first use, not at start-up:
// every binary that imports this package (the sandbox launcher, tool
// plugins) starts without paying for it.
type Rule struct {
	// Schema and Pointer locate the pattern ("config.schema.json",
	// "/$defs/namespace").
	Schema, Pointer string

	once sync.Once
	r    *nameRule
}

type nameRule struct {
	pattern string
	max     int
	desc    string
	re      *regexp.Regexp
}

func (r *Rule) rule() *nameRule {
	r.once.Do(func() {
		nr, err := loadNameRule(r.Schema, r.Pointer)
		if err != nil {
			panic(fmt.Sprintf("schemas/%s#%s: %v (a build problem)", r.Schema, r.Pointer, err))
		}
		r.r = nr
	})
	return r.r
}

// Pattern is the regular expression, as the schema states it.
func (r *Rule) Pattern() string { return r.rule().pattern }

// Max is the longest name allowed.
func (r *Rule) Max() int { return r.rule().max }

// Desc says the rule in words: "1-64 characters of A-Z a-z 0-9 _ . -".
func (r *Rule) Desc() string { return r.rule().desc }

// The name rules of the kernel.
var (
	// ToolName is a tool's name as the model sees it.
	ToolName = ruleAt("tool-manifest.schema.json", "/$defs/tool/properties/name")
	// PluginToolName is a tool's name as a subprocess plugin declares it,
	// before "plugin." is put in front.
	PluginToolName = ruleAt("tool-manifest.schema.json", "/$defs/pluginToolName")
	// Namespace is a subprocess plugin's or an MCP server's name.
	Namespace = ruleAt("config.schema.json", "/$defs/namespace")
	// ModuleName is a WASM module's name.
	ModuleName = ruleAt("tool-manifest.schema.json", "/properties/name")
	// HookName is a configured hook rule's name.
	HookName = ruleAt("config.schema.json", "/properties/hooks/properties/rules/items/properties/name")
)

// Valid reports whether s follows the rule.
func (r *Rule) Valid(s string) bool { return r.rule().re.MatchString(s) }

// Check returns nil for a valid name, else an error that quotes it and
// states the rule: `"has space" must be 1-64 characters of A-Z a-z 0-9 _ . -`.
func (r *Rule) Check(s string) error {
	if r.Valid(s) {
		return nil
	}
	return fmt.Errorf("%q must be %s", s, r.Desc())
}

func ruleAt(schema, pointer string) *Rule {
	return &Rule{Schema: schema, Pointer: pointer}
}

// simplePattern is the shape of every name pattern: an optional class for
// the first character, then a class with a count. Compiled on first use,
// like the rules: not in every binary's start-up.
var simplePattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\^(?:\[([^\]]+)\])?\[([^\]]+)\]\{(\d+),(\d+)\}\$$`)
})

func loadNameRule(schema, pointer string) (*nameRule, error) {
	data, err := schemas.FS.ReadFile(schema)
	if err != nil {
		return nil, err
	}
	var root map[string]any
	if err := json.Unmarshal(data, &root); err != nil {
		return nil, err
	}
	n, err := ResolveRef(root, "#"+pointer)
	if err != nil {
		return nil, err
	}
	m, _ := n.(map[string]any)
	pattern, _ := m["pattern"].(string)
	if pattern == "" {
		return nil, fmt.Errorf("no pattern")
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	p := simplePattern().FindStringSubmatch(pattern)
	if p == nil {
		return nil, fmt.Errorf("pattern %q is not of the form ^[first]?[class]{min,max}$", pattern)
	}
	lo, _ := strconv.Atoi(p[3])
	hi, _ := strconv.Atoi(p[4])
	r := &nameRule{pattern: pattern, re: re}
	if p[1] != "" {
		lo, hi = lo+1, hi+1
	}
	r.max = hi
	r.desc = fmt.Sprintf("%d-%d characters of %s", lo, hi, classWords(p[2]))
	switch first := p[1]; {
	case first == "":
	case strings.Trim(first, "a-zA-Z") == "" && strings.Contains(first, "-"):
		r.desc += ", starting with a letter"
	default:
		r.desc += ", starting with " + classWords(first)
	}
	return r, nil
}

// classWords spells a character class: "A-Za-z0-9_.-" is "A-Z a-z 0-9 _ . -".
func classWords(c string) string {
	var parts []string
	for i := 0; i < len(c); i++ {
		if i+2 < len(c) && c[i+1] == '-' {
			parts = append(parts, c[i:i+3])
			i += 2
			continue
		}
		parts = append(parts, c[i:i+1])
	}
	return strings.Join(parts, " ")
}

// ResolveRef returns the node a local $ref ("#/$defs/x") points at in a
// decoded JSON Schema.
func ResolveRef(root map[string]any, ref string) (any, error) {
	ptr, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, fmt.Errorf("$ref %q: only local references (#/...) are supported", ref)
	}
	var n any = root
	for _, part := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if part == "" {
			continue
		}
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		m, ok := n.(map[string]any)
		if !ok || m[part] == nil {
			return nil, fmt.Errorf("$ref %q: nothing at %q", ref, part)
		}
		n = m[part]
	}
	return n, nil
}
