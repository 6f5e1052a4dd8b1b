package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/mcptest"
)

// TestShellWrappersAreResolved is issue 36's fourth finding: a command the
// kernel starts through a shell wrapper — an MCP server's
// [sh, -c, "exec python3 {workspace}/srv.py"], a hook's or a plugin's — is
// looked into. A script the -c string runs that a tool can write (the
// workspace is read-write to write_file) is refused at start, whether it
// exists yet or not (the model could create it before the server's lazy
// start), naming it; a -c string whose files cannot be known before it
// runs ($VAR, a glob, a substitution) is refused while tools can write
// anything. Without looking into -c strings each of these starts, and the
// model's srv.py runs as the server with its environment.
func TestShellWrappersAreResolved(t *testing.T) {
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(sh)
	pin := hex.EncodeToString(sum[:])
	base := "model: {provider: scripted, name: m, script: script.yaml}\ntools:\n  builtin:\n    enable: [read_file, write_file]\n"
	for _, tc := range []struct {
		name, config, want string
		exists             bool // srv.py is in the workspace already
	}{
		{"mcp server, the issue's wrapper", "  mcp:\n    - {name: s, command: [sh, -c, \"exec python3 {workspace}/srv.py\"]}\n",
			"a file the command of MCP server s runs WS/srv.py", true},
		{"mcp server, a script the model has not written yet", "  mcp:\n    - {name: s, command: [sh, -c, \"exec python3 {workspace}/srv.py\"]}\n",
			"a file the command of MCP server s runs WS/srv.py", false},
		{"mcp server, cd into the workspace", "  mcp:\n    - {name: s, command: [bash, -lc, \"cd {workspace} && exec python3 srv.py\"]}\n",
			"a file the command of MCP server s runs WS/srv.py", true},
		{"mcp server, a variable", "  mcp:\n    - {name: s, command: [sh, -c, \"exec python3 $SRV_DIR/srv.py\"]}\n",
			"the command of MCP server s: sh -c \"exec python3 $SRV_DIR/srv.py\" runs a shell script whose files cannot be known before it runs: it expands $SRV_DIR", true},
		{"hook", "hooks:\n  rules:\n    - {name: h, phase: before, command: {argv: [sh, -c, \"python3 WS/srv.py\"]}}\n",
			"a file the command of hook h runs WS/srv.py", true},
		{"hook, a glob", "hooks:\n  rules:\n    - {name: h, phase: before, command: {argv: [sh, -c, \"python3 WS/*.py\"]}}\n",
			"it expands a glob", true},
		{"plugin", "  plugins:\n    - {name: p, path: /bin/sh, sha256: " + pin + ", args: [-c, \"exec WS/srv.py\"]}\n",
			"a file the arguments of plugin p name WS/srv.py", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, ws := t.TempDir(), t.TempDir()
			if tc.exists {
				writeFiles(t, ws, map[string]string{"srv.py": "print('the operator wrote this')\n"})
			}
			conf := strings.ReplaceAll(base+tc.config, "WS", ws) + "workspace: " + ws + "\n"
			writeFiles(t, dir, map[string]string{"kernel.yaml": conf, "script.yaml": "steps:\n  - text: done\n"})
			_, errOut, err := cli(t, "run", "--config", filepath.Join(dir, "kernel.yaml"), "--store", t.TempDir(), "go")
			if !errors.Is(err, ErrProtectedWritable) {
				t.Fatalf("started with a wrapped script tools can write: %v\n%s", err, errOut)
			}
			if want := strings.ReplaceAll(tc.want, "WS", ws); !strings.Contains(err.Error(), want) {
				t.Errorf("the refusal does not say %q:\n%v", want, err)
			}
		})
	}
}

// TestShellWrapperOutsideToolsStarts: a wrapper whose script lies outside
// every directory tools can write starts, and its server may read the
// program the script runs (the read grant follows the -c string).
func TestShellWrapperOutsideToolsStarts(t *testing.T) {
	srv := mcptest.Server(t)
	dir, ws := t.TempDir(), t.TempDir()
	writeFiles(t, dir, map[string]string{
		"script.yaml": "steps:\n  - tool_calls:\n      - {name: s.echo, args: {text: through the wrapper}}\n  - text: done\n",
		"kernel.yaml": "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: " + ws + "\n" +
			"tools:\n  builtin:\n    enable: [read_file, write_file]\n  mcp:\n    - name: s\n      command: [sh, -c, \"exec " + srv + "\"]\n      tiers: {echo: read_only}\n",
	})
	out := runAndShow(t, filepath.Join(dir, "kernel.yaml"), "go")
	if !strings.Contains(out, "through the wrapper") || strings.Contains(out, "✗") {
		t.Fatalf("the wrapped server did not answer:\n%s", out)
	}
}
