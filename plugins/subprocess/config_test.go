package subprocess_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/plugins/subprocess"
)

func TestDurationDecoding(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, json string
		want             time.Duration
		err              string
	}{
		{"string", `timeout: 1m30s`, `{"timeout":"1m30s"}`, 90 * time.Second, ""},
		{"milliseconds", `timeout: 250ms`, `{"timeout":"250ms"}`, 250 * time.Millisecond, ""},
		{"bare number", `timeout: 30`, `{"timeout":30}`, 0, "duration string"},
		{"nonsense", `timeout: soon`, `{"timeout":"soon"}`, 0, "not a duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var y, j subprocess.PluginConfig
			yerr := yaml.Unmarshal([]byte(tc.yaml), &y)
			jerr := json.Unmarshal([]byte(tc.json), &j)
			if tc.err != "" {
				if yerr == nil || !strings.Contains(yerr.Error(), tc.err) || !strings.Contains(yerr.Error(), "line 1") {
					t.Errorf("yaml: %v, want an error with the line mentioning %q", yerr, tc.err)
				}
				if jerr == nil || !strings.Contains(jerr.Error(), tc.err) {
					t.Errorf("json: %v, want an error mentioning %q", jerr, tc.err)
				}
				return
			}
			if yerr != nil || jerr != nil || y.Timeout.D() != tc.want || j.Timeout.D() != tc.want {
				t.Errorf("yaml %v %v, json %v %v, want %s", y.Timeout, yerr, j.Timeout, jerr, tc.want)
			}
			out, err := yaml.Marshal(y)
			if err != nil || !strings.Contains(string(out), "timeout: "+tc.want.String()) {
				t.Errorf("round trip: %s %v", out, err)
			}
		})
	}
}
