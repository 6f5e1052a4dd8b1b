package supervise

import (
	"time"

	"github.com/agentkernel/agentkernel/internal/config"
)

// RestartPolicy configures a supervisor: the subprocess plugin host's and
// the MCP host's. A crash is the process (or session) ending when the host
// did not stop it, or failing to start.
type RestartPolicy struct {
	// MaxCrashes consecutive crashes open the circuit breaker (default 3):
	// the tools answer "unavailable" until Cooldown has passed; then one
	// call may try again. A call that is answered resets the count.
	MaxCrashes int `yaml:"max_crashes,omitempty" json:"max_crashes,omitempty"`
	// Backoff is the wait before restarting after a crash (default 200ms),
	// doubled for each further consecutive crash and capped at Cooldown.
	Backoff config.Duration `yaml:"backoff,omitempty" json:"backoff,omitempty"`
	// Cooldown is how long an open circuit stays open (default 30s).
	Cooldown config.Duration `yaml:"cooldown,omitempty" json:"cooldown,omitempty"`
}

// The defaults of the zero RestartPolicy.
const (
	DefaultMaxCrashes = 3
	DefaultBackoff    = 200 * time.Millisecond
	DefaultCooldown   = 30 * time.Second
)

// Normalize checks r (a problem names its field under restart) and
// returns it with the defaults filled in.
func (r RestartPolicy) Normalize() (RestartPolicy, *config.Error) {
	switch {
	case r.MaxCrashes < 0:
		return r, config.Errorf("restart.max_crashes", "must not be negative")
	case r.Backoff < 0:
		return r, config.Errorf("restart.backoff", "must not be negative")
	case r.Cooldown < 0:
		return r, config.Errorf("restart.cooldown", "must not be negative")
	}
	config.Default(&r.MaxCrashes, DefaultMaxCrashes)
	config.Default(&r.Backoff, config.Duration(DefaultBackoff))
	config.Default(&r.Cooldown, config.Duration(DefaultCooldown))
	return r, nil
}
