package wasm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/wasm"
	"github.com/agentkernel/agentkernel/plugins/wasm/wasmtest"
)

func Example() {
	ctx := context.Background()
	host, err := wasm.NewHost(ctx, wasm.HostConfig{CacheDir: wasmtest.CacheDir()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer host.Close(ctx)

	// The test fixture module (testdata/attack, built by make wasm or the
	// tests), granted one environment variable and a 2s timeout.
	tools, warnings, err := host.Load(ctx, wasm.ModuleConfig{
		Path: "testdata/attack/attack.wasm",
		Grants: wasm.Grants{
			Env:     map[string]string{"AK_VISIBLE": "hello"},
			Timeout: wasm.Duration(2 * time.Second),
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(warnings), "requests not granted, e.g.:", warnings[0])

	var env kernel.Tool
	for _, t := range tools {
		if t.Spec().Name == "env" {
			env = t
		}
	}
	// Load the module now (read, check, compile or read from the cache);
	// otherwise the first call would, within its 2s.
	if err := wasm.Ready(ctx, env); err != nil {
		fmt.Println(err)
		return
	}
	res, err := env.Call(ctx, json.RawMessage(`{}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	caps, _ := wasm.Capabilities(env)
	fmt.Println(env.Spec().Source, "sees:", res.Content)
	fmt.Println("granted:", caps)
	// Output:
	// 6 requests not granted, e.g.: fs /data (rw) requested but not granted: the guest will not see it
	// wasm:attack sees: AK_VISIBLE=hello
	// granted: env=AK_VISIBLE memory=64MiB timeout=2s output=64KiB
}
