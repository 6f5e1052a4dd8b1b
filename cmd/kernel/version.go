package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version can still be set at build time (-ldflags "-X main.version=v1.2.3");
// otherwise `kernel version` reads the build information Go embeds: the
// module version (a release tag for `go install ...@v1.2.3`, a pseudo-version
// or "(devel)" otherwise) and, for a build from a git checkout, the commit.
var version = ""

// versionInfo is what `kernel version` prints.
type versionInfo struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

func buildVersion() versionInfo {
	bi, ok := debug.ReadBuildInfo()
	return versionFrom(bi, ok)
}

// versionFrom reads the version out of build information. A git worktree
// (.git is a file there) gets no VCS stamp from the go command; a clone does.
func versionFrom(bi *debug.BuildInfo, ok bool) versionInfo {
	v := versionInfo{Version: version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if !ok || bi == nil {
		if v.Version == "" {
			v.Version = "unknown"
		}
		return v
	}
	if v.Version == "" {
		v.Version = bi.Main.Version
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func (v versionInfo) String() string {
	s := "kernel " + v.Version
	if v.Revision != "" {
		rev := v.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += " (" + rev
		if v.Modified {
			s += ", modified"
		}
		if v.Time != "" {
			s += ", " + v.Time
		}
		s += ")"
	}
	return s + " " + v.Go + " " + v.Platform
}

func cmdVersion(_ context.Context, args []string, env *cliEnv) error {
	fs := newFlagSet("version", "", env.stderr)
	asJSON := fs.Bool("json", false, "print the version information as JSON")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("version takes no arguments, got %q", pos[0])
	}
	v := buildVersion()
	if *asJSON {
		return writeJSON(env, v)
	}
	fmt.Fprintln(env.stdout, v)
	return nil
}

// writeJSON prints v as indented JSON: the --json output of every command.
func writeJSON(env *cliEnv, v any) error {
	enc := json.NewEncoder(env.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
