package kernel

import (
	"encoding/json"
	"time"
)

// Durations in events are Go duration strings ("1.5s", "120ms", "0s"), as
// schemas/events.schema.json states, not integer nanoseconds: a reader of an
// --events file sees the unit. The Go fields stay time.Duration; these
// MarshalJSON methods change only the JSON.

// jsonDuration renders a time.Duration as its String().
type jsonDuration time.Duration

func (d jsonDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// MarshalJSON renders Duration as a duration string.
func (e MessageCompleted) MarshalJSON() ([]byte, error) {
	type plain MessageCompleted
	return json.Marshal(struct {
		plain
		Duration jsonDuration `json:"duration"`
	}{plain(e), jsonDuration(e.Duration)})
}

// MarshalJSON renders Duration as a duration string.
func (e ToolCompleted) MarshalJSON() ([]byte, error) {
	type plain ToolCompleted
	return json.Marshal(struct {
		plain
		Duration jsonDuration `json:"duration"`
	}{plain(e), jsonDuration(e.Duration)})
}

// MarshalJSON renders Duration as a duration string.
func (e ContextCompacted) MarshalJSON() ([]byte, error) {
	type plain ContextCompacted
	return json.Marshal(struct {
		plain
		Duration jsonDuration `json:"duration,omitempty"`
	}{plain(e), jsonDuration(e.Duration)})
}

// MarshalJSON renders Delay as a duration string.
func (e ProviderRetry) MarshalJSON() ([]byte, error) {
	type plain ProviderRetry
	return json.Marshal(struct {
		plain
		Delay jsonDuration `json:"delay"`
	}{plain(e), jsonDuration(e.Delay)})
}

// MarshalJSON renders Duration as a duration string.
func (e RunCompleted) MarshalJSON() ([]byte, error) {
	type plain RunCompleted
	return json.Marshal(struct {
		plain
		Duration jsonDuration `json:"duration"`
	}{plain(e), jsonDuration(e.Duration)})
}

// MarshalJSON renders the decision's EvalTime as a duration string.
func (e PolicyDecided) MarshalJSON() ([]byte, error) {
	type decision Decision
	type plain PolicyDecided
	return json.Marshal(struct {
		plain
		Decision struct {
			decision
			EvalTime jsonDuration `json:"eval_time"`
		} `json:"decision"`
	}{plain: plain(e), Decision: struct {
		decision
		EvalTime jsonDuration `json:"eval_time"`
	}{decision(e.Decision), jsonDuration(e.Decision.EvalTime)}})
}
