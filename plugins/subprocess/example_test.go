package subprocess_test

import (
	"fmt"

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
