package policy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Sentinel errors a *LoadError matches (errors.Is) according to the stages
// that found problems, so callers can tell a typo from a failing test.
var (
	// ErrSyntax: the file is not valid YAML or does not have the policy
	// shape (unknown or missing fields, wrong types, duplicate keys).
	ErrSyntax = errors.New("policy syntax error")
	// ErrCompile: an expression does not compile (unknown field, wrong
	// type, bad syntax) or names something undefined.
	ErrCompile = errors.New("policy compile error")
	// ErrLint: the policy compiles but is wrong in a way lint can see
	// (duplicate ids, unregistered tools, unreachable or untested rules).
	ErrLint = errors.New("policy lint error")
	// ErrTestsFailed: one of the file's own tests failed.
	ErrTestsFailed = errors.New("policy tests failed")
)

// Stage is where a problem was found.
type Stage string

// The stages of loading a policy, in order.
const (
	StageSyntax  Stage = "syntax"
	StageCompile Stage = "compile"
	StageLint    Stage = "lint"
	StageTest    Stage = "test"
	// StageDeprecated marks a use of a deprecated name: reported by
	// Policy.Deprecated and `kernel policy check`, never an error.
	StageDeprecated Stage = "deprecated"
)

// Problem is one thing wrong with a policy file, located in the file.
type Problem struct {
	File  string
	Line  int // 1-based; 0 when the problem is about the whole file
	Col   int // 1-based
	Stage Stage
	// Where names the part of the file: `rule "no-rm"`, `vars.evidence`,
	// `surfaces.select[1]`, `test "denies rm"`.
	Where string
	Msg   string
	// Source is the file's line at Line, shown under the message with a
	// caret at Col.
	Source string
}

// String renders the problem as "file:line:col: where: message".
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", p.Line, p.Col)
	}
	b.WriteString(": ")
	if p.Where != "" {
		b.WriteString(p.Where)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// LoadError is a policy that did not load, with every problem found.
type LoadError struct {
	File     string
	Problems []Problem
	// Unregistered are the tool names the file uses (in rules, drop rules
	// and conditions) that are not among Options.Tools, in the order of
	// their first use.
	Unregistered []string
}

// Error lists the problems, one per line, each followed by the offending
// source line and a caret under the column.
func (e *LoadError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "policy %s: %d problem", e.File, len(e.Problems))
	if len(e.Problems) != 1 {
		b.WriteString("s")
	}
	for _, p := range e.Problems {
		b.WriteString("\n")
		b.WriteString(p.String())
		if p.Source != "" && p.Col > 0 {
			src := strings.ReplaceAll(p.Source, "\t", " ")
			fmt.Fprintf(&b, "\n    %s\n    %s^", src, strings.Repeat(" ", min(p.Col-1, len(src))))
		}
	}
	return b.String()
}

// Is matches the sentinel of every stage that found a problem.
func (e *LoadError) Is(target error) bool {
	for _, p := range e.Problems {
		switch {
		case p.Stage == StageSyntax && target == ErrSyntax,
			p.Stage == StageCompile && target == ErrCompile,
			p.Stage == StageLint && target == ErrLint,
			p.Stage == StageTest && target == ErrTestsFailed:
			return true
		}
	}
	return false
}

// problems collects Problems for one file.
type problems struct {
	file  string
	lines []string
	list  []Problem
	ctx   context.Context // nil: not cancellable; see compiler.compile
	// unregistered goes to LoadError.Unregistered.
	unregistered []string
}

func (ps *problems) add(stage Stage, line, col int, where, format string, a ...any) {
	p := Problem{File: ps.file, Line: line, Col: col, Stage: stage, Where: where, Msg: fmt.Sprintf(format, a...)}
	if line > 0 && line <= len(ps.lines) {
		p.Source = ps.lines[line-1]
	}
	ps.list = append(ps.list, p)
}

func (ps *problems) at(stage Stage, at pos, where, format string, a ...any) {
	ps.add(stage, at.Line, at.Col, where, format, a...)
}

func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	sort.SliceStable(ps.list, func(i, j int) bool {
		a, b := ps.list[i], ps.list[j]
		return a.Line < b.Line || a.Line == b.Line && a.Col < b.Col
	})
	return &LoadError{File: ps.file, Problems: ps.list, Unregistered: ps.unregistered}
}
