package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
)

func srcTool(name, source, schema string) kernel.Tool {
	return kernel.NewTool(kernel.ToolSpec{Name: name, Tier: kernel.TierReadOnly, Source: source, Schema: json.RawMessage(schema)},
		func(context.Context, json.RawMessage) (kernel.Result, error) {
			return kernel.Result{Content: name}, nil
		})
}

func TestRegistrySync(t *testing.T) {
	r := kernel.NewRegistry()
	if err := r.Register(srcTool("read_file", "builtin", ""), srcTool("s.a", "mcp:s", ""), srcTool("s.b", "mcp:s", "")); err != nil {
		t.Fatal(err)
	}
	errs := r.Sync("mcp:s", []kernel.Tool{
		srcTool("s.b", "mcp:s", `{"type":"object","properties":{"x":{"type":"integer"}}}`),
		srcTool("s.c", "mcp:s", ""),
		srcTool("s.bad", "mcp:s", `{"type":"object","properties":{"x":{"type":"nonsense"}}}`),
		srcTool("read_file", "mcp:s", ""),
	})
	if len(errs) != 2 {
		t.Fatalf("want the bad schema and the taken name reported, got %v", errs)
	}
	if !errors.Is(errs[1], kernel.ErrDuplicateTool) {
		t.Errorf("taken name: %v", errs[1])
	}
	if got, want := fmt.Sprint(r.Names()), "[read_file s.b s.c]"; got != want {
		t.Errorf("names %s, want %s", got, want)
	}
	if _, err := r.Validate("s.b", json.RawMessage(`{"x":"no"}`)); !errors.Is(err, kernel.ErrInvalidArgs) {
		t.Errorf("s.b was not replaced by its new schema: %v", err)
	}
	if _, ok := r.Lookup("s.a"); ok {
		t.Error("s.a is still registered")
	}
}

// Syncs racing with lookups, validation and spec listing (run with -race).
func TestRegistrySyncHammer(t *testing.T) {
	r := kernel.NewRegistry()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				if g == 0 {
					r.Sync("mcp:s", []kernel.Tool{srcTool(fmt.Sprintf("s.t%d", i%3), "mcp:s", "")})
					continue
				}
				r.Lookup("s.t1")
				r.Validate("s.t2", nil)
				_ = r.Specs()
				_ = r.Len()
			}
		}()
	}
	wg.Wait()
}
