package kernel

import (
	"encoding/json"
	"time"
)

// StoredEvent is one event of a session as an EventLog keeps it.
type StoredEvent struct {
	// Seq is the event's place in its session's log, from 1, assigned by
	// AppendEvents. It never repeats, also across restarts: it is the id
	// a client resumes a stream from.
	Seq uint64 `json:"seq"`
	// Type is the event's type (Event.Type).
	Type string `json:"type"`
	// Time is when the event was appended.
	Time time.Time `json:"time"`
	// Data is the event as MarshalEvent renders it.
	Data json.RawMessage `json:"data"`
}
