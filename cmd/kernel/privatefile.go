package main

import (
	"fmt"
	"os"
)

// writePrivateFile writes b to path readable by its owner only (0600),
// whatever the umask and whatever mode an existing file had: a session
// export holds prompts and tool output.
func writePrivateFile(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
