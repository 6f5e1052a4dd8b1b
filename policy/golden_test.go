package policy_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/policy"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with the golden file, or rewrites it with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func fixtures(t *testing.T, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures match %s", pattern)
	}
	return files
}

// TestLoadErrorsGolden loads every broken policy in testdata/errors and
// compares the error text, which names file:line:col, the rule and the
// problem, with its golden file.
func TestLoadErrorsGolden(t *testing.T) {
	for _, file := range fixtures(t, "testdata/errors/*.yaml") {
		t.Run(filepath.Base(file), func(t *testing.T) {
			_, err := policy.LoadFile(context.Background(), file, policy.Options{Tools: policy.BuiltinSpecs()})
			if err == nil {
				t.Fatal("a broken policy loaded")
			}
			golden(t, strings.TrimSuffix(file, ".yaml")+".golden", []byte(err.Error()+"\n"))
		})
	}
}

// TestPolicyTestGolden is the output of `kernel policy test` for the
// example policies (verbose) and a policy with failing tests.
func TestPolicyTestGolden(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   []string
		verbose bool
		ok      bool
	}{
		{"examples", []string{"../examples/policies/coding.yaml", "../examples/policies/readonly-auditor.yaml", "../examples/policies/ci-bot.yaml"}, true, true},
		{"failing", []string{"testdata/errors/failing-test.yaml", "testdata/errors/untested.yaml"}, false, false},
		{"broken", []string{"testdata/errors/misspelt-field.yaml"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			ok, err := policy.TestFiles(context.Background(), &out, tc.files, policy.Options{}, tc.verbose)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.ok {
				t.Errorf("TestFiles = %t, want %t", ok, tc.ok)
			}
			golden(t, "testdata/test-output/"+tc.name+".golden", out.Bytes())
		})
	}
}

// TestExplainGolden explains every case in testdata/explain against the
// policy its first line names ("# policy: FILE").
func TestExplainGolden(t *testing.T) {
	for _, file := range fixtures(t, "testdata/explain/*.yaml") {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(src), "\n")
			polFile, ok := strings.CutPrefix(first, "# policy: ")
			if !ok {
				t.Fatalf("%s: the first line must be # policy: FILE", file)
			}
			p, err := policy.CompileFile(context.Background(), filepath.Join("testdata/explain", polFile), policy.Options{})
			if err != nil {
				t.Fatal(err)
			}
			in, err := policy.ReadInput(file)
			if err != nil {
				t.Fatal(err)
			}
			x, err := p.Explain(in)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := x.Format(&out); err != nil {
				t.Fatal(err)
			}
			golden(t, strings.TrimSuffix(file, ".yaml")+".golden", out.Bytes())
		})
	}
}
