//go:build race

package sandbox

import (
	"os"
	"strings"
)

// A race-enabled launcher (a test binary that calls Main is its own
// launcher) sleeps a second before it exits with status 0: the race
// detector's atexit_sleep_ms, 1000 by default. That is after its report,
// but the host waits for the launcher's exit, so every confined process
// cost a second of idle wall time in the race-enabled tests (issue 45).
// The launcher is started with atexit_sleep_ms=0 added to GORACE (races
// are still detected and still make its exit status 66), and Main puts
// the program's own GORACE back before anything reads the environment.

// raceEnvSaved carries the program's GORACE ("=" and the value) or "-"
// (unset) from the host to the launcher.
const raceEnvSaved = "AGENTKERNEL_SANDBOX_PROGRAM_GORACE"

// launcherEnv is env (the program's environment, which a cold start's
// launcher is started with) with the launcher's GORACE.
func launcherEnv(env []string) []string {
	if env == nil {
		env = os.Environ()
	}
	saved := "-"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GORACE="); ok {
			saved = "=" + v
		}
	}
	opts := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	return append(env[:len(env):len(env)], "GORACE="+opts, raceEnvSaved+"="+saved)
}

// restoreProgramEnv undoes launcherEnv in the launcher.
func restoreProgramEnv() {
	saved, ok := os.LookupEnv(raceEnvSaved)
	if !ok {
		return
	}
	os.Unsetenv(raceEnvSaved)
	if v, ok := strings.CutPrefix(saved, "="); ok {
		os.Setenv("GORACE", v)
	} else {
		os.Unsetenv("GORACE")
	}
}
