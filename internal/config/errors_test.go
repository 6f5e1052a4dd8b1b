package config_test

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/agentkernel/agentkernel/internal/config"
)

// TestErrorSaysWhatIsKnown: the one configuration error renders the place
// it knows (file and position, entry, field) and nothing it does not, and
// errors.Is sees the cause.
func TestErrorSaysWhatIsKnown(t *testing.T) {
	cause := errors.New("is required")
	for _, tc := range []struct {
		err  *config.Error
		want string
	}{
		{&config.Error{File: "kernel.yaml", Line: 3, Column: 5, Field: "tools.plugins[0].sha256", Err: cause}, "kernel.yaml:3:5: tools.plugins[0].sha256: is required"},
		{&config.Error{File: "kernel.yaml", Field: "model.script", Err: cause}, "kernel.yaml: model.script: is required"},
		{&config.Error{Kind: "hook", Name: "a", Field: "hooks.rules[0].match", Err: cause}, `hook "a": hooks.rules[0].match: is required`},
		{&config.Error{Kind: "hook", Field: "hooks.rules[0].name", Err: cause}, "hooks.rules[0].name: is required"},
		{&config.Error{File: "kernel.yaml", Kind: "mcp server", Name: "fs", Field: "tools.mcp[1].url", Err: cause}, `kernel.yaml: mcp server "fs": tools.mcp[1].url: is required`},
		{config.Errorf("env[2]", "%q is reserved: %w", "PLUGIN_X", fs.ErrPermission), `env[2]: "PLUGIN_X" is reserved: permission denied`},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%#v renders %q, want %q", tc.err, got, tc.want)
		}
	}
	if err := error(&config.Error{Kind: "plugin", Name: "git", Field: "name", Err: cause}); !errors.Is(err, cause) {
		t.Error("errors.Is does not see the cause")
	}
	if !errors.Is(config.Errorf("x", "wrapped: %w", fs.ErrNotExist), fs.ErrNotExist) {
		t.Error("Errorf does not wrap with %w")
	}
}
