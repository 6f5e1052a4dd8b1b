package badger

import (
	"errors"
	"os"
	"path/filepath"
)

// DefaultDir is the default store directory: $XDG_DATA_HOME/agentkernel,
// or ~/.local/share/agentkernel when XDG_DATA_HOME is unset or not an
// absolute path (the XDG spec says to ignore relative paths). The CLI's
// --store flag and the config's store.dir override it.
func DefaultDir() (string, error) {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "agentkernel"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return "", errors.New("default session store: neither XDG_DATA_HOME nor HOME is set; pass --store DIR")
	}
	return filepath.Join(home, ".local", "share", "agentkernel"), nil
}
