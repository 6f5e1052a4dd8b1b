package sdk_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// forbidden are the packages a plugin binary must not link: the kernel
// (and through it everything the host needs), the JSON Schema library and
// the YAML decoder of the kernel's config. The kernel validates arguments
// before a call reaches a plugin; the contract a plugin needs is package
// tool, and the tool-name rule comes from internal/config/names.
//
// A plugin's spans go back to the host with its results (RATIONALE.md,
// "Plugin spans travel back over the plugin's gRPC connection"): it links
// the OpenTelemetry SDK and the OTLP encoding, never an exporter that
// opens a connection of its own.
var forbidden = []string{
	"github.com/agentkernel/agentkernel/kernel",
	"github.com/agentkernel/agentkernel/internal/schema",
	"github.com/santhosh-tekuri/jsonschema/v5",
	"gopkg.in/yaml.v3",
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc",
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp",
	"github.com/agentkernel/agentkernel/telemetry",
}

// deps lists the packages pkg links, as `go list -deps` prints them.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(goCmd, "list", "-deps", pkg).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

func linked(all []string) []string {
	var bad []string
	for _, d := range all {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				bad = append(bad, d)
			}
		}
	}
	return bad
}

// TestPluginsLinkNeitherKernelNorJSONSchema keeps plugin binaries small and
// the contract narrow: the SDK, and a plugin built with it, import package
// tool and never the kernel or jsonschema.
func TestPluginsLinkNeitherKernelNorJSONSchema(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, pkg := range []string{
		"github.com/agentkernel/agentkernel/tool",
		"github.com/agentkernel/agentkernel/sdk",
		"github.com/agentkernel/agentkernel/examples/plugins/git",
	} {
		all := deps(t, pkg)
		if bad := linked(all); len(bad) > 0 {
			t.Errorf("%s links %s; a plugin must depend on package tool only", pkg, strings.Join(bad, ", "))
		}
		if pkg != "github.com/agentkernel/agentkernel/tool" && !slices.Contains(all, "github.com/agentkernel/agentkernel/tool") {
			t.Errorf("%s does not link package tool: is the check looking at the right thing?", pkg)
		}
	}
	// The check itself: sdktest runs plugins through the kernel's host, so
	// it must be flagged.
	if bad := linked(deps(t, "github.com/agentkernel/agentkernel/sdk/sdktest")); !slices.Contains(bad, "github.com/agentkernel/agentkernel/kernel") {
		t.Errorf("the check misses the kernel in sdktest's dependencies: %v", bad)
	}
}
