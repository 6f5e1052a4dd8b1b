package kernel

import (
	"context"
	"maps"
	"slices"
)

// CallSessionInfo is what the kernel tells a tool about the session its
// call runs in: the session's id, its labels (in kernel serve the key's
// owner, label serve.owner, which the server sets and a client cannot)
// and the agent that runs it. The kernel sets it on the context of every
// call it dispatches (CallSession), from the run's own state: nothing the
// model writes and no argument of the call can change it.
type CallSessionInfo struct {
	SessionID string
	// Labels is a copy of the session's labels; changing it changes
	// nothing.
	Labels map[string]string
	// Agent is the agent the session runs, with its depth and chain of
	// callers (an agent's child session is a session of its own).
	Agent AgentState
}

// callSessionKey is the context key of a call's CallSessionInfo; only the
// kernel's call contexts answer it.
type callSessionKey struct{}

// CallSession returns the session of the tool call whose context ctx is
// (or derives from), and false for a context the kernel did not make for
// a call it dispatched: a tool called outside a run learns nothing, and
// must refuse what needs a session. A context.WithValue of a caller cannot
// forge it: the key is unexported.
func CallSession(ctx context.Context) (CallSessionInfo, bool) {
	st, ok := ctx.Value(callSessionKey{}).(*State)
	if !ok || st == nil || st.SessionID == "" {
		return CallSessionInfo{}, false
	}
	a := st.Agent
	a.Chain = slices.Clone(a.Chain)
	return CallSessionInfo{SessionID: st.SessionID, Labels: maps.Clone(st.Labels), Agent: a}, true
}
