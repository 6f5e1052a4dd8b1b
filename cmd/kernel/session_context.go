package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/badger"
)

// fileRecord is path with the SHA-256 of its content ("" when unreadable).
func fileRecord(path string) *kernel.RecordedFile {
	if path == "" {
		return nil
	}
	rf := &kernel.RecordedFile{Path: path}
	if b, err := os.ReadFile(path); err == nil {
		sum := sha256.Sum256(b)
		rf.SHA256 = hex.EncodeToString(sum[:])
	}
	return rf
}

// sessionContext is what a new session records about where it runs.
func (a *app) sessionContext() *kernel.SessionContext {
	cfg := a.cfg
	sc := &kernel.SessionContext{
		Workspace: cfg.path(cfg.Workspace),
		Provider:  cfg.Model.Provider,
		Model:     cfg.Model.Name,
		BaseURL:   cfg.Model.BaseURL,
		APIKeyEnv: cfg.Model.APIKeyEnv,

		ToolProtocol: cfg.toolProtocol,
		ToolFormat:   cfg.toolFormat,
	}
	if fi, err := os.Stat(sc.Workspace); err == nil {
		sc.WorkspaceID = fileID(fi)
	}
	for _, f := range cfg.files {
		sc.Config = append(sc.Config, *fileRecord(f))
	}
	if pc, err := cfg.policyConfig(); err == nil && pc.File != "" {
		sc.Policy = fileRecord(pc.File)
		if a.policyWatcher != nil {
			if p := a.policyWatcher.Policy(); p != nil {
				sc.PolicyRevision = p.Revision()
			}
		}
	}
	if cfg.Model.Provider == "scripted" && cfg.Model.Script != "" {
		sc.Script = fileRecord(cfg.path(cfg.Model.Script))
	}
	if st, err := cfg.storeConfig(); err == nil {
		switch st.Kind {
		case "memory":
			sc.Store = "memory"
		case "postgres":
			// The variable's name, never the DSN (it holds a password).
			sc.Store = "postgres:$" + st.DSNEnv
		default:
			sc.Store = st.Dir
		}
	}
	return sc
}

// ErrContextChanged is matched by the error of a session whose recorded
// files changed since it was started.
var ErrContextChanged = errors.New("the session's context changed")

// resumeFlags fills the flags a resumed session (approve, reject, run
// --session) did not get on the command line from what the session
// recorded, and checks that the recorded files are unchanged. Flags given
// explicitly win, but a workspace different from the recorded one is
// refused unless accept is set, like a changed file.
func (c *commonFlags) resume(ctx context.Context, id string, accept bool, stderr io.Writer) error {
	s, err := c.loadSession(ctx, id)
	if err != nil || s == nil || s.Meta.Context == nil {
		return err // no record (an old session): the flags as given
	}
	rc := s.Meta.Context
	var changed []string
	if len(c.config) == 0 {
		for _, f := range rc.Config {
			c.config = append(c.config, f.Path)
			changed = append(changed, fileChanged("configuration", &f)...)
		}
	}
	if c.workspace == "" {
		c.workspace = rc.Workspace
	} else if rc.Workspace != "" && absPath(c.workspace) != rc.Workspace {
		changed = append(changed, fmt.Sprintf("the workspace was %s, --workspace says %s", rc.Workspace, absPath(c.workspace)))
	}
	if why := workspaceSwapped(rc); why != "" {
		changed = append(changed, why)
	} else if absPath(c.workspace) == rc.Workspace {
		// The built-in tools check it again when they open the workspace:
		// a swap after this check is refused too.
		c.workspaceID = rc.WorkspaceID
	}
	if c.policy == "" && rc.Policy != nil {
		c.policy = rc.Policy.Path
		changed = append(changed, fileChanged("policy", rc.Policy)...)
	}
	if c.provider.v == "" {
		c.provider.v = rc.Provider
	}
	if c.model == "" {
		c.model = rc.Model
	}
	if c.baseURL == "" {
		c.baseURL = rc.BaseURL
	}
	if c.apiKeyEnv == "" {
		c.apiKeyEnv = rc.APIKeyEnv
	}
	if c.toolProtocol.v == "" {
		c.toolProtocol.v = rc.ToolProtocol
	}
	if c.toolFormat.v == "" {
		c.toolFormat.v = rc.ToolFormat
	}
	if c.script == "" && rc.Script != nil {
		c.script = rc.Script.Path
		changed = append(changed, fileChanged("script", rc.Script)...)
	}
	if c.store == "" && rc.Store != "" && rc.Store != "memory" && !strings.HasPrefix(rc.Store, "postgres:") {
		c.store = rc.Store
	}
	if len(changed) == 0 {
		return nil
	}
	if accept {
		for _, ch := range changed {
			fmt.Fprintf(stderr, "warning: session %s: %s (accepted with --accept-changed)\n", id, ch)
		}
		return nil
	}
	return fmt.Errorf("session %s: %w since it started:\n  %s\nreview the change, then run again with --accept-changed to resume with the files as they are now",
		id, ErrContextChanged, strings.Join(changed, "\n  "))
}

// workspaceSwapped describes how the recorded workspace path no longer
// leads to the directory the session started in ("" when it does, or when
// the session recorded no identity).
func workspaceSwapped(rc *kernel.SessionContext) string {
	if rc.WorkspaceID == nil || rc.Workspace == "" {
		return ""
	}
	fi, err := os.Stat(rc.Workspace)
	if err != nil {
		return fmt.Sprintf("the workspace %s is gone (%v)", rc.Workspace, err)
	}
	if now := fileID(fi); now != nil && *now != *rc.WorkspaceID {
		how := "replaced by another directory"
		if lfi, err := os.Lstat(rc.Workspace); err == nil && lfi.Mode()&os.ModeSymlink != 0 {
			how = "swapped for a symbolic link"
		}
		return fmt.Sprintf("the workspace %s is not the directory the session started in (device %d inode %d then, device %d inode %d now): it was moved, %s",
			rc.Workspace, rc.WorkspaceID.Dev, rc.WorkspaceID.Ino, now.Dev, now.Ino, how)
	}
	return ""
}

// fileChanged describes how a recorded file differs from the one on disk.
func fileChanged(what string, rf *kernel.RecordedFile) []string {
	now := fileRecord(rf.Path)
	switch {
	case now.SHA256 == "" && rf.SHA256 != "":
		return []string{fmt.Sprintf("the %s file %s is gone or unreadable", what, rf.Path)}
	case now.SHA256 != rf.SHA256:
		return []string{fmt.Sprintf("the %s file %s changed (sha256 %.12s… then, %.12s… now)", what, rf.Path, rf.SHA256, now.SHA256)}
	}
	return nil
}

// loadSession reads a session from the store the flags (or the
// configuration they name) select, without keeping the store open. A
// session it cannot find there is not an error here: the kernel reports it
// with the store it is given.
func (c *commonFlags) loadSession(ctx context.Context, id string) (*kernel.Session, error) {
	cfg, err := c.load()
	if err != nil {
		return nil, err
	}
	a := &app{cfg: cfg, log: newLogger(io.Discard)}
	defer a.Close()
	if err := a.openStore(true); err != nil {
		return nil, err
	}
	s, err := a.store.Load(ctx, id)
	if errors.Is(err, kernel.ErrSessionNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// resumeHint is the command that resolves a pending approval, with the
// flags needed to find the session when it is not in the default store.
func resumeHint(verb, sessionID, store string) string {
	args := []string{"kernel", verb}
	if store != "" && store != "memory" {
		args = append(args, "--store", shellQuote(store))
	}
	return strings.Join(append(args, sessionID), " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r == '+' || r == ',' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// storeHint is dir when a hint must name it (it is not the default store).
func storeHint(dir string) string {
	if def, err := badger.DefaultDir(); err == nil && realPath(def) == realPath(dir) {
		return ""
	}
	return dir
}
