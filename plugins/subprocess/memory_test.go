package subprocess_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/memory"
	"github.com/agentkernel/agentkernel/memory/memorytest"
	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"github.com/agentkernel/agentkernel/sandbox"
	"github.com/agentkernel/agentkernel/sdk/sdktest"
)

// The example memory plugin (examples/memory-plugin), built once.
var memoryPlugin struct {
	once      sync.Once
	path, sum string
	err       error
}

func buildMemoryPlugin(t *testing.T) (string, string) {
	t.Helper()
	memoryPlugin.once.Do(func() {
		dir, err := os.MkdirTemp("", "memory-plugin-")
		if err != nil {
			memoryPlugin.err = err
			return
		}
		memoryPlugin.path = filepath.Join(dir, "memory-plugin")
		if memoryPlugin.err = sdktest.BuildTo(memoryPlugin.path, "../../examples/memory-plugin"); memoryPlugin.err != nil {
			return
		}
		memoryPlugin.sum, memoryPlugin.err = sdktest.FileSHA256(memoryPlugin.path)
	})
	if memoryPlugin.err != nil {
		t.Fatal(memoryPlugin.err)
	}
	return memoryPlugin.path, memoryPlugin.sum
}

// hostIndex is a plugin's index that closes its host when it is closed
// (the conformance suite's reopen starts the plugin again).
type hostIndex struct {
	memory.Index
	h *subprocess.Host
}

func (x hostIndex) Close() error {
	err := x.Index.Close()
	x.h.Close()
	return err
}

// TestMemoryPluginConformance: the example memory plugin, a real
// subprocess under the sandbox with one writable directory (deny by
// default otherwise), passes memory's conformance suite through the host's
// client (Host.MemoryIndex).
func TestMemoryPluginConformance(t *testing.T) {
	exe, sum := buildMemoryPlugin(t)
	memorytest.RunIndexTests(t, func(t *testing.T) memorytest.Opener {
		data := t.TempDir()
		return func() (memory.Index, error) {
			h := subprocess.NewHost(subprocess.HostConfig{})
			cfg := subprocess.PluginConfig{Name: "mem", Path: exe, SHA256: sum, Args: []string{data},
				Sandbox: sandbox.Grant{FS: []sandbox.FSRule{{Path: data, Mode: "rw"}}}}
			if _, err := h.Load(context.Background(), cfg); err != nil {
				h.Close()
				return nil, err
			}
			return hostIndex{Index: h.MemoryIndex("mem"), h: h}, nil
		}
	})
}

// TestMemoryPluginConfined: the memory plugin runs confined, deny by
// default: without the grant of its directory it cannot open its journal
// there, and the host refuses to start it, saying why.
func TestMemoryPluginConfined(t *testing.T) {
	exe, sum := buildMemoryPlugin(t)
	data := t.TempDir()
	h := newHost(t, subprocess.HostConfig{})
	_, err := h.Load(context.Background(), subprocess.PluginConfig{Name: "mem", Path: exe, SHA256: sum, Args: []string{data}})
	if err == nil {
		t.Fatal("the memory plugin started without the grant of its directory")
	}
	if _, serr := os.Stat(filepath.Join(data, "memory.journal")); !os.IsNotExist(serr) {
		t.Fatalf("the ungranted plugin wrote its journal in %s (%v)", data, serr)
	}
	t.Logf("refused: %v", err)
}
