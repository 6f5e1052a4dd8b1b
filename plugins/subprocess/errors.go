package subprocess

import (
	"errors"
	"fmt"
	"strings"

	"github.com/agentkernel/agentkernel/internal/config"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrNoPin is a plugin configured without a sha256.
	ErrNoPin = errors.New("plugin binary is not pinned")
	// ErrHashMismatch is a plugin binary, an interpreted plugin's lock or
	// a file it locks, or a pinned interpreter whose sha256 is not the
	// pinned one.
	ErrHashMismatch = errors.New("plugin binary does not match its pinned sha256")
	// ErrStart is a plugin that could not be started: exec, handshake or
	// Describe failed.
	ErrStart = errors.New("plugin failed to start")
	// ErrCrashed is a plugin process that died during a call.
	ErrCrashed = errors.New("plugin crashed")
	// ErrUnavailable is a call refused because the plugin's circuit breaker
	// is open after repeated crashes.
	ErrUnavailable = errors.New("plugin unavailable")
	// ErrClosed is a call or load after the Host was closed.
	ErrClosed = errors.New("plugin host closed")
	// ErrDuplicatePlugin is a second plugin loaded under a taken name.
	ErrDuplicatePlugin = errors.New("duplicate plugin name")
)

// ConfigError is a bad PluginConfig field (internal/config's Error, the
// kernel's one configuration error): Kind "plugin", Name the plugin's name,
// Field the YAML name of the field under the plugin, e.g. "sha256" or
// "env[2]".
type ConfigError = config.Error

// pluginError is a *ConfigError about field of the plugin called name.
func pluginError(name, field string, err error) *ConfigError {
	return &ConfigError{Kind: "plugin", Name: name, Field: field, Err: err}
}

// HashError is a plugin file that was refused: it is not pinned (Expected
// is empty) or its sha256 differs from the pin. Actual is always the
// file's real sha256, so the operator can check it and paste it. Subject
// says which file: the plugin binary (the zero value), an interpreted
// plugin's lock or one of the files it locks, or the interpreter.
type HashError struct {
	Plugin   string
	Path     string
	Expected string
	Actual   string
	Subject  HashSubject
	// Lock is the lock that lists Path, for SubjectLockedFile.
	Lock string
}

// HashSubject is what a HashError is about.
type HashSubject int

// The subjects of a HashError.
const (
	SubjectBinary      HashSubject = iota // a plugin binary, pinned by sha256
	SubjectLock                           // an interpreted plugin's lock, pinned by sha256
	SubjectLockedFile                     // a file an interpreted plugin's lock lists
	SubjectInterpreter                    // an interpreter, pinned by interpreter.sha256
)

func (e *HashError) Error() string {
	switch e.Subject {
	case SubjectLock:
		if e.Expected == "" {
			return fmt.Sprintf("plugin %q: %s is not pinned; its sha256 is %s: after checking that this is the plugin you mean to trust (`sha256sum -c %s` in its directory checks the files it lists), add `sha256: %s` to the plugin's entry in kernel.yaml",
				e.Plugin, e.Path, e.Actual, LockFile, e.Actual)
		}
		return fmt.Sprintf("plugin %q: refusing to run %s: sha256 mismatch: expected %s, actual %s (the plugin's lock changed since it was pinned: its files changed and were locked again; re-pin only after checking them)",
			e.Plugin, e.Path, e.Expected, e.Actual)
	case SubjectLockedFile:
		return fmt.Sprintf("plugin %q: refusing to run %s: sha256 mismatch: expected %s (its lock %s), actual %s (the file changed since the plugin's directory was locked; lock it again and re-pin only after checking it)",
			e.Plugin, e.Path, e.Expected, e.Lock, e.Actual)
	case SubjectInterpreter:
		return fmt.Sprintf("plugin %q: refusing to run the interpreter %s: sha256 mismatch: expected %s, actual %s (the interpreter changed since it was pinned, by an upgrade or otherwise; re-pin interpreter.sha256 only after checking it)",
			e.Plugin, e.Path, e.Expected, e.Actual)
	}
	if e.Expected == "" {
		return fmt.Sprintf("plugin %q: %s is not pinned; its sha256 is %s: after checking that this is the binary you mean to trust, add `sha256: %s` to the plugin's entry in kernel.yaml",
			e.Plugin, e.Path, e.Actual, e.Actual)
	}
	return fmt.Sprintf("plugin %q: refusing to run %s: sha256 mismatch: expected %s, actual %s (the binary changed since it was pinned; re-pin only after checking it)",
		e.Plugin, e.Path, e.Expected, e.Actual)
}

// Unwrap returns ErrNoPin or ErrHashMismatch.
func (e *HashError) Unwrap() error {
	if e.Expected == "" {
		return ErrNoPin
	}
	return ErrHashMismatch
}

// StartError is a plugin that did not start. Stderr holds the last lines
// the plugin wrote to its standard error, if any.
type StartError struct {
	Plugin string
	Reason string
	Stderr string
	Err    error
}

func (e *StartError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "start plugin %q: %s", e.Plugin, e.Reason)
	if e.Stderr != "" {
		fmt.Fprintf(&b, "\nlast stderr lines of the plugin:\n%s", indent(e.Stderr))
	}
	return b.String()
}

// Unwrap returns ErrStart and the cause.
func (e *StartError) Unwrap() []error { return []error{ErrStart, e.Err} }

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return "  " + strings.Join(lines, "\n  ")
}
