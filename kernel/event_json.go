package kernel

import (
	"encoding/json"
	"fmt"
	"time"
)

// Durations in events and in the decision log are Go duration strings
// ("1.5s", "120ms", "0s"), as schemas/events.schema.json states, not integer
// nanoseconds: a reader of an --events file or a decision log sees the unit.
// The Go fields stay time.Duration; these methods change only the JSON.
// Reading accepts integer nanoseconds too, the form decision logs written
// before had (RATIONALE.md, "Durations are strings in every JSON the kernel
// writes").

// jsonDuration renders a time.Duration as its String().
type jsonDuration time.Duration

func (d jsonDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string or, as older files have it, an
// integer number of nanoseconds.
func (d *jsonDuration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: want a Go duration such as \"1.5s\" or \"8µs\"", s)
		}
		*d = jsonDuration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("duration %s: want a string such as \"1.5s\" or integer nanoseconds", b)
	}
	*d = jsonDuration(n)
	return nil
}

// decisionJSON is Decision's JSON form: EvalTime as a duration string.
type decisionJSON struct {
	decisionFields
	EvalTime jsonDuration `json:"eval_time"`
}

type decisionFields Decision

// MarshalJSON renders EvalTime as a duration string, in events and in the
// decision log alike.
func (d Decision) MarshalJSON() ([]byte, error) {
	return json.Marshal(decisionJSON{decisionFields(d), jsonDuration(d.EvalTime)})
}

// UnmarshalJSON reads what MarshalJSON writes, and eval_time as integer
// nanoseconds (decision logs written before it was a string).
func (d *Decision) UnmarshalJSON(b []byte) error {
	var v decisionJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*d = Decision(v.decisionFields)
	d.EvalTime = time.Duration(v.EvalTime)
	return nil
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

// MarshalJSON renders the nested event with its type, as MarshalEvent
// renders any event.
func (e AgentEvent) MarshalJSON() ([]byte, error) {
	var inner json.RawMessage = []byte("null")
	if e.Event != nil {
		b, err := MarshalEvent(e.Event)
		if err != nil {
			return nil, err
		}
		inner = b
	}
	type plain AgentEvent
	return json.Marshal(struct {
		plain
		Event json.RawMessage `json:"event"`
	}{plain(e), inner})
}

// MarshalJSON renders Duration as a duration string.
func (e HookCompleted) MarshalJSON() ([]byte, error) {
	type plain HookCompleted
	return json.Marshal(struct {
		plain
		Duration jsonDuration `json:"duration"`
	}{plain(e), jsonDuration(e.Duration)})
}
