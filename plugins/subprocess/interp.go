package subprocess

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/agentkernel/agentkernel/sandbox"
)

// checkInterpreter checks an interpreted plugin's interpreter and records
// the file to execute: cfg.Interpreter.Path with its links resolved (the
// sandbox shows that file, not the links to it). The interpreter is
// trusted by path, like the system's libraries: it must be a binary, not
// a script; it and its directory must be writable by nobody but their
// owner, root or the kernel's user (whoever can replace it chooses what
// runs). With interpreter.sha256 set, its bytes must have that sha256.
func checkInterpreter(cfg PluginConfig) error {
	in := cfg.Interpreter
	bad := func(format string, args ...any) error {
		return pluginError(cfg.Name, "interpreter.path", fmt.Errorf(format, args...))
	}
	real, err := filepath.EvalSymlinks(in.Path)
	if err != nil {
		return bad("%v (is it installed? `command -v %s` prints its path)", err, filepath.Base(in.Path))
	}
	f, err := os.Open(real)
	if err != nil {
		return bad("%v", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return bad("%v", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return bad("%s is not an executable file", real)
	}
	if err := checkOwner(real, fi); err != nil {
		return bad("%v", err)
	}
	dfi, err := os.Stat(filepath.Dir(real))
	if err != nil {
		return bad("%v", err)
	}
	if err := checkOwner(filepath.Dir(real), dfi); err != nil {
		return bad("%v", err)
	}
	head := make([]byte, 2)
	if n, _ := io.ReadFull(f, head); n == 2 && string(head) == "#!" {
		return bad("%s is a script (#!), not a binary: name the program that runs it (what its first line names), so that nothing unpinned runs in between", real)
	}
	if in.SHA256 != "" {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return bad("%v", err)
		}
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return bad("hash %s: %v", real, err)
		}
		if sum := hex.EncodeToString(h.Sum(nil)); !pinMatches(in.SHA256, sum) {
			return &HashError{Plugin: cfg.Name, Path: real, Expected: in.SHA256, Actual: sum, Subject: SubjectInterpreter}
		}
	}
	in.exec = real
	return nil
}

// checkOwner refuses a file or directory that someone other than root or
// the kernel's user could change.
func checkOwner(p string, fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if ok && st.Uid != 0 && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%s is owned by uid %d, neither root nor the kernel's user: its owner could change what runs", p, st.Uid)
	}
	if m := fi.Mode(); m.Perm()&0o022 != 0 && !(m.IsDir() && m&os.ModeSticky != 0 && ok && st.Uid == 0) {
		return fmt.Errorf("%s is writable by its group or others (mode %s): others could change what runs (`chmod go-w %s`)", p, m.Perm(), p)
	}
	return nil
}

// interpreterFS is what an interpreted plugin reads besides its copied
// directory and the system's libraries: the interpreter's file, its
// installation's lib directory (for an interpreter in /usr/bin, /usr/lib,
// already among sandbox.LibraryDirs; for one in ~/.pyenv/versions/3.11/bin,
// ~/.pyenv/versions/3.11/lib, where its standard modules are), and
// OpenSSL's configuration file, which node refuses to start without
// reading when it exists.
func interpreterFS(in *Interpreter) []sandbox.FSRule {
	real := in.exec
	if real == "" {
		var err error
		if real, err = filepath.EvalSymlinks(in.Path); err != nil {
			real = in.Path
		}
	}
	rules := []sandbox.FSRule{{Path: real, Mode: "ro"}, {Path: opensslConfig, Mode: "ro", Optional: true}}
	lib := filepath.Join(filepath.Dir(filepath.Dir(real)), "lib")
	if !slices.ContainsFunc(sandbox.LibraryDirs(), func(r sandbox.FSRule) bool { return r.Path == lib || strings.HasPrefix(lib, r.Path+"/") }) {
		rules = append(rules, sandbox.FSRule{Path: lib, Mode: "ro", Optional: true})
	}
	return rules
}

// opensslConfig is OpenSSL's configuration file (OPENSSLDIR/openssl.cnf
// on Debian and in the Node.js builds for Linux).
const opensslConfig = "/etc/ssl/openssl.cnf"

// commandLine is what the host executes for a verified plugin whose
// private copy is exe: the program (argv[0]) and its arguments. A binary
// runs as itself; an interpreted plugin runs as its interpreter with
// Interpreter.Args, the copied script and Args.
func commandLine(cfg PluginConfig, exe string) []string {
	in := cfg.Interpreter
	if in == nil {
		return append([]string{exe}, cfg.Args...)
	}
	script, err := filepath.Rel(filepath.Dir(cfg.Path), cfg.Path)
	if err != nil {
		script = filepath.Base(cfg.Path)
	}
	argv := append([]string{in.exec}, in.Args...)
	argv = append(argv, filepath.Join(exe, script))
	return append(argv, cfg.Args...)
}
