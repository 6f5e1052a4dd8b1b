package wasm

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/schema"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/manifests")

func mustSchema(t testing.TB) *manifestSchema {
	t.Helper()
	ms, err := compileManifestSchema()
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestManifestGolden parses every testdata/manifests/*.json; the outcome
// ("ok" and the tools, or the error) is compared with the .golden file
// beside it. Run with -update to rewrite them.
func TestManifestGolden(t *testing.T) {
	ms := mustSchema(t)
	files, err := filepath.Glob("testdata/manifests/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			m, err := ms.parseManifest(f, data)
			okCase := strings.HasPrefix(filepath.Base(f), "ok_")
			switch {
			case err != nil:
				if okCase {
					t.Fatalf("a valid manifest was refused: %v", err)
				}
				if !errors.Is(err, ErrManifest) {
					t.Errorf("error %v does not wrap ErrManifest", err)
				}
				got = "error: " + err.Error() + "\n"
			case okCase:
				got = "ok: " + m.Name + " abi=" + m.ABI + " tools=" + toolNames(m) + "\n"
			default:
				t.Fatal("an invalid manifest was accepted")
			}
			golden := strings.TrimSuffix(f, ".json") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestManifestGolden -update)", err)
			}
			if got != string(want) {
				t.Errorf("got:\n%s\nwant (%s):\n%s", got, golden, want)
			}
		})
	}
}

func toolNames(m *manifest) string {
	var names []string
	for _, tl := range m.Tools {
		names = append(names, tl.Name)
	}
	return strings.Join(names, ",")
}

// TestRealManifests: every manifest shipped in the repository is valid,
// and the schema file on disk is the one the binary embeds.
func TestRealManifests(t *testing.T) {
	ms := mustSchema(t)
	files := []string{
		"../../wasm-tools/jq/tool.json",
		"../../wasm-tools/js/tool.json",
		"../../wasm-tools/gojq/tool.json",
		"testdata/attack/tool.json",
		"testdata/reactor/tool.json",
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ms.parseManifest(f, data); err != nil {
			t.Errorf("%v", err)
		}
	}
	onDisk, err := os.ReadFile("../../schemas/" + manifestSchemaFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := schema.Compile(manifestSchemaFile, onDisk); err != nil {
		t.Fatalf("schemas/%s does not compile: %v", manifestSchemaFile, err)
	}
}

func FuzzParseManifest(f *testing.F) {
	files, _ := filepath.Glob("testdata/manifests/*.json")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	ms := mustSchema(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ms.parseManifest("fuzz.json", data)
		if err != nil {
			if !errors.Is(err, ErrManifest) {
				t.Fatalf("error %v does not wrap ErrManifest", err)
			}
			return
		}
		if m.Name == "" || len(m.Tools) == 0 || (m.ABI != ABIJSON && m.ABI != ABIReactor && m.ABI != ABIArgv) {
			t.Fatalf("accepted an incomplete manifest: %+v", m)
		}
		for _, tl := range m.Tools {
			if !tl.Tier.Valid() {
				t.Fatalf("accepted tier %q", tl.Tier)
			}
			if (m.ABI == ABIArgv) != (tl.Argv != nil) {
				t.Fatalf("argv %v with abi %s", tl.Argv, m.ABI)
			}
		}
	})
}
