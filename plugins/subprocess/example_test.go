package subprocess_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"gopkg.in/yaml.v3"
)

// A plugin entry of kernel.yaml's tools.plugins list decodes into a
// PluginConfig; Validate names the field at fault.
func ExamplePluginConfig_Validate() {
	var cfg subprocess.PluginConfig
	err := yaml.Unmarshal([]byte(`
name: git
path: bin/plugins/git
sha256: 3f5a
args: [-repo, examples/demo/workspace]
env: [HOME]
timeout: 30s
restart: {max_crashes: 3, backoff: 200ms, cooldown: 1m}
`), &cfg)
	fmt.Println(err, cfg.Timeout, cfg.Restart.Cooldown)
	fmt.Println(cfg.Validate())
	// Output:
	// <nil> 30s 1m0s
	// plugin "git": sha256: "3f5a" is not 64 hex digits (compute it with `sha256sum bin/plugins/git`)
}

// An interpreted plugin is pinned by the lock of its script's directory:
// WriteLock (`kernel plugins lock DIR`) writes it and returns the sha256
// that kernel.yaml pins; the lock is sha256sum's format.
func ExampleWriteLock() {
	dir, _ := os.MkdirTemp("", "plugin-")
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "plugin.py"), []byte("serve([count_words])\n"), 0o644)
	sum, files, err := subprocess.WriteLock(dir)
	lock, _ := os.ReadFile(filepath.Join(dir, subprocess.LockFile))
	fmt.Print(files, " ", err, "\n", string(lock))
	fmt.Println(len(sum))

	cfg := subprocess.PluginConfig{Name: "csv", Path: "plugin.py", SHA256: sum, Interpreter: &subprocess.Interpreter{Path: "python3"}}
	fmt.Println(cfg.Validate())
	// Output:
	// 1 <nil>
	// a7d980128d69680249ef5880fed710596b3f17b1c65c73909d870fa16d8c5ba5  plugin.py
	// 64
	// plugin "csv": interpreter.path: "python3" is not an absolute path: name the interpreter by its absolute path (`command -v python3` prints it), so that what runs does not depend on PATH
}
