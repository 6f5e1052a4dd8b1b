package kernel

import (
	"context"
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

// EventLog is an optional interface of a Store: it keeps each session's
// events, so that a front end (`kernel serve`) can replay them to a client
// that reconnects, from any process that opens the store. A Store without
// it has no event history; `kernel serve` refuses to start on it.
//
// AppendEvents stores events at the end of session id's log, all or
// nothing and durable when it returns, assigning consecutive Seq values
// after the last stored one (the events' own Seq is ignored); it returns
// the first. It fails with an error wrapping ErrSessionNotFound for a
// session the store does not hold. ReadEvents returns, in order, up to
// limit (at least 1; the store may cap it) events of session id whose Seq
// is greater than after; an unknown session has none. Deleting a session
// (SessionDeleter) deletes its events.
//
// Implementations must be safe for concurrent use; concurrent appends to
// one session are serialised. kerneltest.TestEventLog checks the contract.
// Why: RATIONALE.md, "Events are stored per session, with ids".
type EventLog interface {
	AppendEvents(ctx context.Context, id string, events []StoredEvent) (first uint64, err error)
	ReadEvents(ctx context.Context, id string, after uint64, limit int) ([]StoredEvent, error)
}
