package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

func cmdTools(ctx context.Context, args []string, env *cliEnv) error {
	if len(args) > 0 && args[0] == "import" {
		return toolsImport(ctx, args[1:], env)
	}
	fs := newFlagSet("tools", "[NAME...]", env.stderr)
	var cf commonFlags
	cf.register(fs)
	asJSON := fs.Bool("json", false, "print the full specs, schemas included, as JSON")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	a, err := loadApp(ctx, &cf, env, false)
	if err != nil {
		return err
	}
	defer a.Close()
	specs := a.tools.Specs()
	if len(pos) > 0 {
		specs = nil
		var missing []string
		for _, name := range pos {
			spec, ok := a.tools.Spec(name)
			if !ok {
				missing = append(missing, fmt.Sprintf("%q", name))
				continue
			}
			specs = append(specs, spec)
		}
		if len(missing) > 0 {
			return fmt.Errorf("no tool %s (kernel tools lists them)", strings.Join(missing, ", "))
		}
		*asJSON = true
	}
	if *asJSON {
		out := toolsJSON(specs)
		native := nativeGrants(a.cfg)
		for i, s := range specs {
			t, _ := a.tools.Lookup(s.Name)
			if g := grantedColumn(t, native, s.Name, s.Source); g != "-" {
				out[i].Granted = g
			}
		}
		return writeJSON(env, out)
	}
	rows := [][]string{{"NAME", "TIER", "SOURCE", "ARGUMENTS", "GRANTED", "DESCRIPTION"}}
	native := nativeGrants(a.cfg)
	for _, s := range specs {
		t, _ := a.tools.Lookup(s.Name)
		rows = append(rows, []string{s.Name, string(s.Tier), s.Source, argSummary(s.Schema), grantedColumn(t, native, s.Name, s.Source), clip(firstLine(s.Description), 50)})
	}
	for _, n := range a.warnings {
		fmt.Fprintf(env.stderr, "warning: %s\n", n.Text)
	}
	// On a terminal the long cells (arguments, grants, descriptions) are
	// cut to fit; the whole entry is `kernel tools NAME`.
	cut, err := writeTable(env.stdout, rows, terminalWidth(env.stdout), 4, 5, 3)
	if err != nil {
		return err
	}
	hint := fmt.Sprintf("%d tools · * required argument", len(specs))
	if cut {
		hint += " · … cut"
	}
	fmt.Fprintln(env.stderr, hint+" · `kernel tools NAME` shows one in full")
	return nil
}

// argSummary renders an object schema's properties as "path*:string, limit:integer".
func argSummary(schema json.RawMessage) string {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil || len(s.Properties) == 0 {
		return "-"
	}
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if req[names[i]] != req[names[j]] {
			return req[names[i]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, n := range names {
		star := ""
		if req[n] {
			star = "*"
		}
		typ := s.Properties[n].Type
		if typ == nil {
			typ = "any"
		}
		parts[i] = fmt.Sprintf("%s%s:%v", n, star, typ)
	}
	return strings.Join(parts, ", ")
}
