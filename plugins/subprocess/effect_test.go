package subprocess_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"github.com/agentkernel/agentkernel/sandbox"
)

// TestPluginSideEffectCheck is the crash-repair scenario through a real
// plugin process: a session whose last round of plugin calls was cut by a
// crash (calls stored, no results), one of the calls done. On the next
// run the plugin's own check tells each call's outcome; a tool without a
// check stays "may or may not have run". It fails if the host does not
// ask the plugin.
func TestPluginSideEffectCheck(t *testing.T) {
	dir := t.TempDir()
	h := newHost(t, subprocess.HostConfig{})
	cfg := misbehaveConfig()
	cfg.Sandbox = sandbox.Grant{FS: []sandbox.FSRule{{Path: dir, Mode: "rw"}}}
	tools := load(t, h, cfg)
	done, missing := filepath.Join(dir, "done"), filepath.Join(dir, "missing")
	arg := func(p string) string { return fmt.Sprintf(`{"text":%q}`, p) }
	mustCall(t, tools["mb.mark"], arg(done)) // ran before the crash

	reg := kernel.NewRegistry()
	if err := reg.Register(tools["mb.mark"], tools["mb.echo"]); err != nil {
		t.Fatal(err)
	}
	got := kerneltest.RepairResults(t, reg, time.Now().Add(-time.Minute),
		kernel.ToolCall{ID: "c1", Name: "mb.mark", Arguments: arg(done)},
		kernel.ToolCall{ID: "c2", Name: "mb.mark", Arguments: arg(missing)},
		kernel.ToolCall{ID: "c3", Name: "mb.echo", Arguments: arg("x")})
	for id, want := range map[string]string{
		"c1": kernel.InterruptedCompleted + done + " has the mark",
		"c2": kernel.InterruptedNotRun + missing + " does not exist",
		"c3": kernel.Interrupted,
	} {
		if !strings.HasPrefix(got[id], want) {
			t.Errorf("call %s: result %q, want it to start with %q", id, got[id], want)
		}
	}
}
