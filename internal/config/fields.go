package config

import (
	"fmt"
	"regexp"
)

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidEnvName reports whether s is an environment variable name.
func ValidEnvName(s string) bool { return envNameRE.MatchString(s) }

// CheckEnvList checks the env allowlist of a process the kernel starts
// (field is its name, "env"): names only, each once, none that reserved
// refuses (reserved returns why, or "" for a name the process may get;
// nil reserves nothing).
func CheckEnvList(field string, names []string, reserved func(string) string) *Error {
	seen := map[string]bool{}
	for i, n := range names {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case !ValidEnvName(n):
			return Errorf(f, "%q is not an environment variable name (list names only, not NAME=value)", n)
		case reserved != nil && reserved(n) != "":
			return Errorf(f, "%q is reserved for %s", n, reserved(n))
		case seen[n]:
			return Errorf(f, "%q is listed twice", n)
		}
		seen[n] = true
	}
	return nil
}

// Default sets *p to def when it holds the zero value: "zero means the
// default" in one line per field.
func Default[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}
