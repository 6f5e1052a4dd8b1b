package wasmtest_test

import (
	"testing"

	"github.com/agentkernel/agentkernel/plugins/wasm"
	"github.com/agentkernel/agentkernel/plugins/wasm/wasmtest"
)

func TestCacheDirIsTheKernelDefault(t *testing.T) {
	for _, xdg := range []string{"", "/var/cache/x"} {
		t.Setenv("XDG_CACHE_HOME", xdg)
		want, err := wasm.DefaultCacheDir()
		if err != nil {
			t.Skip(err)
		}
		if got := wasmtest.CacheDir(); got != want {
			t.Errorf("XDG_CACHE_HOME=%q: CacheDir %q, DefaultCacheDir %q", xdg, got, want)
		}
	}
}
