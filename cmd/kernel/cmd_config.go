package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-hclog"
	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/kernel"
)

// configLayer is one configuration file the kernel considered.
type configLayer struct {
	Path  string `json:"path"`
	Kind  string `json:"kind"` // "--config", "user" or "project"
	Found bool   `json:"found"`
}

// ProjectConfig and UserConfig are the files found without --config.
const (
	projectConfigName = "kernel.yaml"
	userConfigRel     = "agentkernel/kernel.yaml"
)

// configLayers lists the files laid over the embedded defaults, lowest
// first. With --config, exactly those files, in order. Without it, the
// user's file ($XDG_CONFIG_HOME/agentkernel/kernel.yaml, else
// ~/.config/agentkernel/kernel.yaml) and then the project's (./kernel.yaml):
// both are used when both exist, and the project's wins where they
// disagree. Flags win over every file.
func configLayers(paths []string) []configLayer {
	if len(paths) > 0 {
		out := make([]configLayer, len(paths))
		for i, p := range paths {
			out[i] = configLayer{Path: p, Kind: "--config", Found: true} // a missing one is an error
		}
		return out
	}
	var out []configLayer
	if dir, err := userConfigDir(); err == nil {
		out = append(out, discovered(filepath.Join(dir, userConfigRel), "user"))
	}
	if wd, err := os.Getwd(); err == nil {
		out = append(out, discovered(filepath.Join(wd, projectConfigName), "project"))
	}
	return out
}

func discovered(path, kind string) configLayer {
	st, err := os.Stat(path)
	return configLayer{Path: path, Kind: kind, Found: err == nil && st.Mode().IsRegular()}
}

// userConfigDir is $XDG_CONFIG_HOME, else ~/.config, on every system (one
// documented place rather than macOS's Application Support).
func userConfigDir() (string, error) {
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" && filepath.IsAbs(x) {
		return x, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".config"), nil
}

// setsField reports whether a layer's document sets a dotted field.
func setsField(doc *yaml.Node, field string) bool {
	found := false
	walkPath(doc, strings.Split(field, "."), func(*yaml.Node) { found = true })
	return found
}

// logLevels are the values of --log-level and $KERNEL_LOG.
var logLevels = []string{"trace", "debug", "info", "warn", "error", "off"}

// logLevel is the flag's level, else $KERNEL_LOG's, else warn.
func logLevel(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	v := strings.ToLower(strings.TrimSpace(os.Getenv("KERNEL_LOG")))
	if v == "" {
		return "warn", nil
	}
	for _, l := range logLevels {
		if v == l {
			return v, nil
		}
	}
	return "", usageError("KERNEL_LOG=%s: want one of %s", v, strings.Join(logLevels, ", "))
}

// newLevelLogger is the CLI's logger at a level from logLevel.
func newLevelLogger(stderr io.Writer, level string) hclog.Logger {
	if level == "" {
		return newLogger(stderr)
	}
	return hclog.New(&hclog.LoggerOptions{Name: "kernel", Output: stderr, Level: hclog.LevelFromString(level)})
}

// configGroup is `kernel config`.
var configGroup = group{
	name: "config",
	footer: `Without --config the kernel reads, when they exist, the user's file
($XDG_CONFIG_HOME/agentkernel/kernel.yaml, else ~/.config/agentkernel/kernel.yaml)
and then the project's (./kernel.yaml), each laid over the embedded defaults;
the project's wins where both set a field. --config FILE (repeatable) replaces
both. Flags win over every file.`,
	subs: []subcmd{
		{name: "show", summary: "the configuration files in effect, lowest first, then the merged result", flags: noFlags(configShow)},
	},
}

// configShow is `kernel config show`.
func configShow(ctx context.Context, cf *commonFlags, env *cliEnv, _ []string) error {
	cfg, err := cf.load()
	if err != nil {
		return err
	}
	return writeConfigShow(env.stdout, cfg)
}

func writeConfigShow(w io.Writer, cfg *Config) error {
	fmt.Fprintln(w, "# Layers, lowest first; a later one wins where both set a field, flags win over all.")
	fmt.Fprintln(w, "#   (embedded defaults)   cmd/kernel/defaults.yaml")
	for _, l := range cfg.layers {
		state := ""
		if !l.Found {
			state = "   (not found)"
		}
		abs := l.Path
		if a, err := filepath.Abs(l.Path); err == nil {
			abs = a
		}
		fmt.Fprintf(w, "#   %-20s  %s%s\n", l.Kind, abs, state)
	}
	fmt.Fprintf(w, "# log level: %s\n", cfg.logLevel)
	fmt.Fprintln(w, "# The configuration in effect (paths made absolute):")
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// newToolsApp is an app with only the tools loaded, exactly as newApp
// loads them: what the policy commands check names against.
func newToolsApp(ctx context.Context, cfg *Config, stderr io.Writer) (*app, error) {
	a := &app{cfg: cfg, tools: kernel.NewRegistry(), log: newLevelLogger(stderr, cfg.logLevel), stderr: stderr}
	if err := a.loadTools(ctx); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}
