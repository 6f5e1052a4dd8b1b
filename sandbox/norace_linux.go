//go:build !race

package sandbox

// launcherEnv is env: only a race-enabled launcher needs more
// (race_linux.go).
func launcherEnv(env []string) []string { return env }

func restoreProgramEnv() {}
