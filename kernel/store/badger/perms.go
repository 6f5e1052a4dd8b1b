package badger

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
)

// The store holds prompts, tool output and approvals: only its owner may
// read it. prepareDir creates the directory 0700; an existing one that
// group or others may enter is narrowed to 0700 with a warning, and
// refused (naming the fix) when this user cannot change it.
// fixFileModes narrows the files in it to 0600 when the store opens and
// closes: Badger creates its files 0666 minus the umask, which the 0700
// directory keeps out of reach in between.
func prepareDir(dir string, log hclog.Logger) error {
	fi, err := os.Stat(dir)
	if os.IsNotExist(err) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("open session store: %w", err)
		}
		// MkdirAll's mode is filtered by the umask, which may also drop
		// the owner's own bits.
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("open session store: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("open session store: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("open session store %s: not a directory", dir)
	}
	if mode := fi.Mode().Perm(); mode&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("open session store %s: the directory has mode %#o, so other users can read the sessions in it, and changing it to 0700 failed: %w; run chmod 700 %s or choose another store directory",
				dir, mode, err, dir)
		}
		log.Warn(fmt.Sprintf("session store directory had mode %#o (open to other users); changed it to 0700", mode), "dir", dir)
	}
	return nil
}

// fixFileModes sets every file of dir (and its subdirectories, 0700) that
// group or others may access to 0600.
func fixFileModes(dir string, log hclog.Logger) {
	var fixed int
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil || fi.Mode().Perm()&0o077 == 0 {
			return nil
		}
		mode := os.FileMode(0o600)
		if d.IsDir() {
			mode = 0o700
		}
		if d.Type()&os.ModeSocket != 0 || d.Type().IsRegular() || d.IsDir() {
			if os.Chmod(p, mode) == nil {
				fixed++
			}
		}
		return nil
	})
	if fixed > 0 {
		log.Debug("narrowed store files to owner-only", "dir", dir, "count", fixed)
	}
}
