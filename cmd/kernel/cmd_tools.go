package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
)

func cmdTools(ctx context.Context, args []string, env *cliEnv) error {
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
		return writeJSON(env, toolsJSON(specs))
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTIER\tSOURCE\tARGUMENTS\tGRANTED\tDESCRIPTION")
	native := nativeGrants(a.cfg)
	for _, s := range specs {
		t, _ := a.tools.Lookup(s.Name)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Tier, s.Source, argSummary(s.Schema), grantedColumn(t, native, s.Name, s.Source), clip(firstLine(s.Description), 50))
	}
	for _, n := range a.warnings {
		fmt.Fprintf(env.stderr, "warning: %s\n", n.Text)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "%d tools · `kernel tools NAME` prints one tool's full schema · * marks required arguments\n", len(specs))
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
