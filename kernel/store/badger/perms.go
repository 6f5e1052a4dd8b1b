package badger

import (
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/agentkernel/agentkernel/internal/privfile"
)

// The store holds prompts, tool output and approvals: only its owner may
// read it, and nobody else may have written it. prepareDir makes the
// directory private with privfile.Dir: created 0700; an existing one
// another user owns, or that group or others may write, is refused (what
// they may have put in it — a session, a pending approval — cannot be told
// from the owner's); one they may only read or enter is narrowed to 0700
// with a warning. fixFileModes narrows the files in it to 0600 when the
// store opens and closes: Badger creates its files 0666 minus the umask,
// which the 0700 directory keeps out of reach in between.
func prepareDir(dir string, log hclog.Logger) error {
	if err := privfile.Dir(dir, "the session store", func(msg string) { log.Warn(msg) }); err != nil {
		return fmt.Errorf("open session store: %w", err)
	}
	return nil
}

// fixFileModes sets every file of dir (and its subdirectories, 0700) that
// group or others may access to 0600.
func fixFileModes(dir string, log hclog.Logger) {
	if n := privfile.NarrowTree(dir); n > 0 {
		log.Debug("narrowed store files to owner-only", "dir", dir, "count", n)
	}
}
