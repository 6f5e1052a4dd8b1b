package declared

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/agentkernel/agentkernel/hooks"
	"github.com/agentkernel/agentkernel/tool"
)

// Redacted replaces a secret's value wherever a declared tool would show
// it (its errors, its results, its preview).
const Redacted = "[REDACTED]"

// resolveSecrets reads the variables names from getenv. A variable that is
// not set, or too short to be redacted by exact value without mangling
// other text (hooks.MinKnownSecret), is an error naming it: a tool does
// not start with a credential the kernel could not keep out of its
// messages.
func resolveSecrets(names []string, getenv func(string) (string, bool)) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range names {
		if _, done := out[n]; done {
			continue
		}
		v, ok := getenv(n)
		switch {
		case !ok:
			return nil, fmt.Errorf("${env:%s}: the environment variable %s is not set: export it before starting the kernel", n, n)
		case strings.TrimSpace(v) == "":
			return nil, fmt.Errorf("${env:%s}: the environment variable %s is empty", n, n)
		case len(strings.TrimSpace(v)) < hooks.MinKnownSecret:
			return nil, fmt.Errorf("${env:%s}: the value of %s is %d characters, shorter than the %d the kernel redacts by exact value; a value this short is not a secret: write it in the file instead",
				n, n, len(strings.TrimSpace(v)), hooks.MinKnownSecret)
		}
		out[n] = v
	}
	return out, nil
}

// redactor replaces a tool's secret values, as sent (plain, and escaped
// for a URL's query or path), with Redacted.
type redactor struct{ r *strings.Replacer }

func newRedactor(secrets map[string]string) redactor {
	var forms []string
	for _, v := range secrets {
		for _, f := range []string{v, strings.TrimSpace(v), url.QueryEscape(v), url.PathEscape(v), jsonString(v)} {
			if f != "" && !slices.Contains(forms, f) {
				forms = append(forms, f)
			}
		}
	}
	if len(forms) == 0 {
		return redactor{}
	}
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) }) // longest first
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, Redacted)
	}
	return redactor{r: strings.NewReplacer(pairs...)}
}

func jsonString(v string) string {
	b, _ := json.Marshal(v)
	return strings.Trim(string(b), `"`)
}

func (r redactor) String(s string) string {
	if r.r == nil {
		return s
	}
	return r.r.Replace(s)
}

// Error returns err with the secrets out of its message (nil stays nil).
// The code of a *tool.Error survives.
func (r redactor) Error(err error) error {
	if err == nil || r.r == nil {
		return err
	}
	msg := err.Error()
	clean := r.r.Replace(msg)
	if clean == msg {
		return err
	}
	// The cause is dropped (its text held the secret); the code is kept.
	return &tool.Error{Code: tool.CodeOf(err), Message: clean}
}
