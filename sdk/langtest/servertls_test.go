package langtest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/plugins/subprocess"
)

// tlsProbe is a Python plugin that reports what its process holds of the
// key the host made for it (plugins/subprocess serverTLS): whether its
// environment or a child's still has it, whether the SDK imported the
// `cryptography` package (it must not: the key is the host's), and the
// certificate it was handed (public, read back from /proc/self/environ,
// which keeps the process's first environment).
const tlsProbe = `import json, os, subprocess, sys
from agentkernel_plugin import serve, tool

@tool(name="probe", tier="read_only")
async def probe(args, ctx):
    child = subprocess.run([sys.executable, "-c", "import os; print(int('PLUGIN_SERVER_KEY' in os.environ))"],
                           capture_output=True, text=True, check=True).stdout.strip()
    first = dict(kv.split(b"=", 1) for kv in open("/proc/self/environ", "rb").read().split(b"\0") if b"=" in kv)
    return json.dumps({"env": "PLUGIN_SERVER_KEY" in os.environ, "child": child == "1",
                       "crypto": "cryptography" in sys.modules,
                       "cert": first.get(b"PLUGIN_SERVER_CERT", b"").decode()})

if __name__ == "__main__":
    serve([probe])
`

// TestPythonServesWithTheHostsKey: the host hands each interpreted
// plugin process a fresh TLS key and certificate, and the Python SDK
// serves with them (the mutual TLS then completes, or no tool would
// load) without importing `cryptography`. The key is that process's
// alone: a second process gets another one (a key shared between
// processes would let one plugin answer for another on its socket),
// and the SDK takes it out of its environment before any tool code
// runs, so the plugin's children do not inherit it. Making one key per
// Host, or leaving the variable in os.environ, fails this.
func TestPythonServesWithTheHostsKey(t *testing.T) {
	t.Parallel()
	cfg := pythonPlugin(t, "tlsprobe", tlsProbe)
	cfg.Start = subprocess.StartEager
	type report struct {
		Env, Child, Crypto bool
		Cert               string
	}
	probe := func() report {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		tools, err := newHost(t).Load(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		res, err := tools[0].Call(ctx, []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		var r report
		if err := json.Unmarshal([]byte(res.Content), &r); err != nil {
			t.Fatalf("%v: %q", err, res.Content)
		}
		return r
	}
	a, b := probe(), probe()
	for _, r := range []report{a, b} {
		if r.Env || r.Child {
			t.Errorf("the server key is still in the plugin's environment (%v) or its child's (%v)", r.Env, r.Child)
		}
		if r.Crypto {
			t.Error("the SDK imported cryptography although the host handed it a key")
		}
		if r.Cert == "" {
			t.Error("the host handed the plugin no certificate")
		}
	}
	if a.Cert == b.Cert {
		t.Error("two plugin processes were handed the same key and certificate")
	}
}
