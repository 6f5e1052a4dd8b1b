package policy

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// MaxFileSize is the largest policy file Load accepts.
const MaxFileSize = 4 << 20

// fileDoc is a policy file as written. The YAML field names are the file
// format (schemas/policy.schema.json, docs/policy.md).
type fileDoc struct {
	Name     str             `yaml:"name"`
	Revision str             `yaml:"revision"`
	Defaults defaultsDoc     `yaml:"defaults"`
	Budget   constsDoc       `yaml:"budget"`
	Vars     varsDoc         `yaml:"vars"`
	Surfaces *surfacesDoc    `yaml:"surfaces"`
	Rules    []ruleDoc       `yaml:"rules"`
	Budgets  []budgetDoc     `yaml:"budgets"`
	Memory   []memoryRuleDoc `yaml:"memory"`
	Tests    testsDoc        `yaml:"tests"`
}

// testsDoc is the tests: section, kept as YAML until the tests are needed:
// a load the test cache vouches for never decodes them (see
// Policy.loadTests).
type testsDoc struct {
	node  *yaml.Node // the list; nil when absent
	where string
}

func (t *testsDoc) decodeNode(d *ydec, n *yaml.Node, where string) {
	if isNull(n) {
		return
	}
	if n = d.resolve(n); n.Kind != yaml.SequenceNode {
		d.errAt(n, where, "expected a list, got %s", kindName(n))
		return
	}
	t.node, t.where = n, where
}

// count is the number of tests, without decoding them.
func (t *testsDoc) count() int {
	if t.node == nil {
		return 0
	}
	return len(t.node.Content)
}

// deprecatedInputs finds the tests whose input uses the deprecated turn:
// section, from the YAML (so that a load that does not decode the tests
// still reports them): each test's name and where its turn: section is.
func (t *testsDoc) deprecatedInputs() (names []string, at []pos) {
	if t.node == nil {
		return nil, nil
	}
	resolve := func(n *yaml.Node) *yaml.Node {
		for n != nil && n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		return n
	}
	field := func(m *yaml.Node, key string) *yaml.Node {
		if m = resolve(m); m == nil || m.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(m.Content); i += 2 {
			if k := resolve(m.Content[i]); k != nil && k.Kind == yaml.ScalarNode && k.Value == key {
				return resolve(m.Content[i+1])
			}
		}
		return nil
	}
	for _, test := range t.node.Content {
		turn := field(field(test, "input"), "turn")
		if turn == nil || isNull(turn) {
			continue
		}
		name := ""
		if n := field(test, "name"); n != nil {
			name = n.Value
		}
		names, at = append(names, name), append(at, posOf(turn))
	}
	return names, at
}

type defaultsDoc struct {
	// ToolCall is the effect when no rule matches: allow, ask or deny.
	ToolCall str `yaml:"tool_call"`
	// Ask is "ask" (default: ask a human) or "deny" (no human is there:
	// whatever would ask is denied).
	Ask str `yaml:"ask"`
}

type surfacesDoc struct {
	Sets    setsDoc     `yaml:"sets"`
	Default str         `yaml:"default"`
	Select  []selectDoc `yaml:"select"`
	Drop    []dropDoc   `yaml:"drop"`
}

type selectDoc struct {
	At      pos     `yaml:"-"`
	ID      str     `yaml:"id"`
	When    exprSrc `yaml:"when"`
	Surface str     `yaml:"surface"`
}

type dropDoc struct {
	At          pos     `yaml:"-"`
	ID          str     `yaml:"id"`
	Description string  `yaml:"description"`
	Tools       []str   `yaml:"tools"`
	When        exprSrc `yaml:"when"`
}

type ruleDoc struct {
	At          pos     `yaml:"-"`
	ID          str     `yaml:"id"`
	Description string  `yaml:"description"`
	Effect      str     `yaml:"effect"`
	Tools       []str   `yaml:"tools"`
	When        exprSrc `yaml:"when"`
	Message     exprSrc `yaml:"message"`
	Mode        str     `yaml:"mode"`
}

type budgetDoc struct {
	At          pos     `yaml:"-"`
	ID          str     `yaml:"id"`
	Description string  `yaml:"description"`
	WarnWhen    exprSrc `yaml:"warn_when"`
	StopWhen    exprSrc `yaml:"stop_when"`
	Message     exprSrc `yaml:"message"`
	WrapUp      bool    `yaml:"wrap_up"`
}

type testDoc struct {
	Name   str       `yaml:"name"`
	Input  Input     `yaml:"input"`
	Expect expectDoc `yaml:"expect"`
}

// expectDoc is what a test expects. Every field is optional; a test must
// set at least one. Lists compare as sets.
type expectDoc struct {
	Decision        str       `yaml:"decision"`
	Rules           *[]string `yaml:"rules"`
	WouldDeny       *[]string `yaml:"would_deny"`
	WouldAsk        *[]string `yaml:"would_ask"`
	Default         *bool     `yaml:"default"`
	Message         *string   `yaml:"message"`
	MessageContains *string   `yaml:"message_contains"`
	Surface         *string   `yaml:"surface"`
	Offered         []string  `yaml:"offered"`
	NotOffered      []string  `yaml:"not_offered"`
	Stop            *string   `yaml:"stop"`
	Warnings        *[]string `yaml:"warnings"`
	WrapUp          *bool     `yaml:"wrap_up"`
	// Memory is what the memory: section does with input.memory: inject
	// or refuse; Dropped the ranks of the hits its drop rules remove;
	// MemoryRules the rules that acted (the refusing rule, the drop
	// rules); WouldRefuse the dry-run refuse rules that matched.
	Memory      str       `yaml:"memory"`
	Dropped     *[]int    `yaml:"dropped"`
	MemoryRules *[]string `yaml:"memory_rules"`
	WouldRefuse *[]string `yaml:"would_refuse"`
	// Excluded is whether the exclude rules keep input.memory.chunk out
	// of memory's index.
	Excluded *bool `yaml:"excluded"`
}

func (e *expectDoc) wantsDecision() bool {
	return e.Decision.Set || e.Rules != nil || e.WouldDeny != nil || e.WouldAsk != nil || e.Default != nil ||
		e.Message != nil || e.MessageContains != nil
}

func (e *expectDoc) wantsSurface() bool {
	return e.Surface != nil || len(e.Offered) > 0 || len(e.NotOffered) > 0
}

func (e *expectDoc) wantsMemory() bool {
	return e.Memory.Set || e.Dropped != nil || e.MemoryRules != nil || e.WouldRefuse != nil
}

func (e *expectDoc) wantsExclusion() bool { return e.Excluded != nil }

func (e *expectDoc) wantsBudget() bool {
	return e.Stop != nil || e.Warnings != nil || e.WrapUp != nil
}

// namedExpr is one entry of vars.
type namedExpr struct {
	Name str
	Expr exprSrc
}

// varsDoc keeps vars in file order: a var may use the vars before it.
type varsDoc []namedExpr

// namedEntries walks a mapping of name: value in file order, reporting a
// node that is not a mapping (expect says what it should hold), keys that
// are not names (or not identifiers, when ident is set) and names defined
// twice (what names them: "var", "surface set"); fn gets the rest.
func (d *ydec) namedEntries(n *yaml.Node, where, expect, what string, ident bool, fn func(k, v *yaml.Node)) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.errAt(n, where, "expected a mapping of %s, got %s", expect, kindName(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := d.resolve(n.Content[i]), d.resolve(n.Content[i+1])
		if k == nil || v == nil || k.Kind != yaml.ScalarNode {
			d.errAt(n.Content[i], where, "keys must be names")
			continue
		}
		if ident && !identRE.MatchString(k.Value) {
			d.errAt(k, where, "%q is not a valid %s name (letters, digits and _, not starting with a digit)", k.Value, what)
			continue
		}
		if seen[k.Value] {
			d.errAt(k, where, "%s %q is defined twice", what, k.Value)
			continue
		}
		seen[k.Value] = true
		fn(k, v)
	}
}

func (v *varsDoc) decodeNode(d *ydec, n *yaml.Node, where string) {
	d.namedEntries(n, where, "name: expression", "var", true, func(k, val *yaml.Node) {
		e := namedExpr{Name: str{V: k.Value, At: posOf(k), Set: true}}
		e.Expr.decodeNode(d, val, where+"."+k.Value)
		*v = append(*v, e)
	})
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// constDef is one budget constant.
type constDef struct {
	Name  string
	At    pos
	Value any // int, float64, bool, string or time.Duration
}

// constsDoc is the budget: section, in file order.
type constsDoc []constDef

func (c *constsDoc) decodeNode(d *ydec, n *yaml.Node, where string) {
	d.namedEntries(n, where, "name: value", "budget constant", true, func(k, val *yaml.Node) {
		v, err := constValue(val)
		if err != nil {
			d.errAt(val, where+"."+k.Value, "%v", err)
			return
		}
		*c = append(*c, constDef{Name: k.Value, At: posOf(k), Value: v})
	})
}

// constValue types a budget constant: integers, numbers, booleans, strings,
// and strings that read as Go durations ("10m", "1h30m") become durations.
func constValue(n *yaml.Node) (any, error) {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		return nil, fmt.Errorf("a budget constant must be a number, a boolean, a string or a duration, got %s", kindName(n))
	}
	switch n.Tag {
	case "!!int":
		i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
		if err != nil {
			return nil, fmt.Errorf("%s is not a valid integer", quoteShort(n.Value))
		}
		return int(i), nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return nil, fmt.Errorf("%s is not a valid number", quoteShort(n.Value))
		}
		return f, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, fmt.Errorf("%s is not a valid boolean", quoteShort(n.Value))
		}
		return b, nil
	}
	if d, err := time.ParseDuration(n.Value); err == nil && strings.IndexFunc(n.Value, isLetter) >= 0 {
		return d, nil
	}
	return n.Value, nil
}

func isLetter(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == 'µ' }

// namedSet is one surface set.
type namedSet struct {
	Name  str
	Tools []str
}

// setsDoc keeps surface sets in file order.
type setsDoc []namedSet

func (s *setsDoc) decodeNode(d *ydec, n *yaml.Node, where string) {
	d.namedEntries(n, where, "set name: [tool names or globs]", "surface set", false, func(k, val *yaml.Node) {
		ns := namedSet{Name: str{V: k.Value, At: posOf(k), Set: true}, Tools: []str{}}
		var tools []str
		d.decode(val, reflectValue(&tools), where+"."+k.Value)
		if tools != nil {
			ns.Tools = tools
		}
		*s = append(*s, ns)
	})
}

// parseFile parses src into a fileDoc, collecting every syntax problem.
func parseFile(ps *problems, src []byte) *fileDoc {
	if len(src) > MaxFileSize {
		ps.add(StageSyntax, 0, 0, "", "file is %d bytes; the limit is %d", len(src), MaxFileSize)
		return nil
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(src))
	if err := dec.Decode(&root); err != nil {
		line := 0
		msg := cleanYAMLErr(err)
		if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = m[2]
		}
		if err.Error() == "EOF" {
			msg = "the file is empty"
		}
		ps.add(StageSyntax, line, 1, "", "%s", msg)
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		ps.add(StageSyntax, extra.Line, extra.Column, "", "a policy file holds one YAML document; found a second one")
		return nil
	}
	doc := new(fileDoc)
	d := &ydec{ps: ps}
	n := &root
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind != yaml.MappingNode {
		d.errAt(n, "", "a policy file is a mapping (name:, revision:, defaults:, rules:, ...), got %s", kindName(n))
		return nil
	}
	d.decode(n, reflectValue(doc), "")
	return doc
}

var yamlLineRE = regexp.MustCompile(`^line (\d+): (.*)$`)
