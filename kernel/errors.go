package kernel

import (
	"errors"
	"fmt"
	"time"

	toolpkg "github.com/agentkernel/agentkernel/tool"
)

// Sentinel errors callers branch on with errors.Is.
var (
	ErrSessionNotFound = errors.New("session not found")
	ErrSeqConflict     = errors.New("message sequence conflict")
	ErrUnknownTool     = errors.New("unknown tool")
	ErrInvalidArgs     = errors.New("invalid arguments")
	ErrNotOffered      = errors.New("tool not offered in this turn")
	ErrDenied          = errors.New("denied by policy")
	ErrBlocked         = errors.New("blocked by hook")
	ErrToolTimeout     = errors.New("tool timed out")
	ErrCancelled       = errors.New("cancelled")
	ErrApprovalPending = errors.New("session has a pending approval")
	ErrNoApproval      = errors.New("session has no pending approval")
	ErrDuplicateTool   = errors.New("duplicate tool name")
	// ErrSessionExists is returned by a SessionImporter's Import of a
	// session whose id is taken, whatever the store.
	ErrSessionExists = errors.New("session already exists")
	// ErrCorrupt is wrapped by every store's error about a stored value
	// that cannot be decoded (a *CorruptError): a checksum mismatch, a
	// truncated value, an unknown encoding, a message missing from the
	// middle of a session.
	ErrCorrupt = errors.New("corrupt session data")

	errNoValidator = errors.New("call has no validator")
)

// CorruptError is a stored value of one session that cannot be read. It
// names the session and what is damaged; errors.Is(err, ErrCorrupt) holds,
// whichever store returned it.
type CorruptError struct {
	Session string
	// Part is "meta", "pending", "message" or what else of the session
	// the store keeps ("event 12").
	Part string
	// Seq is the message's sequence number when Part is "message".
	Seq uint64
	Err error
}

func (e *CorruptError) Error() string {
	if e.Part == "message" {
		return fmt.Sprintf("session %s: message %d: %v: %v", e.Session, e.Seq, ErrCorrupt, e.Err)
	}
	return fmt.Sprintf("session %s: %s: %v: %v", e.Session, e.Part, ErrCorrupt, e.Err)
}

// Unwrap returns ErrCorrupt and the cause.
func (e *CorruptError) Unwrap() []error { return []error{ErrCorrupt, e.Err} }

// LabelCorrupt is the label a store's List puts on the entry of a session
// whose metadata cannot be decoded; its value is the error.
const LabelCorrupt = "store.corrupt"

// ToolError is a failed tool call. Code is a short machine-readable class,
// one of the tool.Code* constants (tool.CodeUnknownTool, CodeInvalidArgs,
// CodeDenied, CodeBlocked, CodeTimeout, CodeCancelled, CodeToolError, ...) or
// a plugin's own code; Err is the cause. A run stopped by a budget is not an
// error: it ends with StopReason "budget:<id>".
type ToolError struct {
	Tool string
	Code string
	Err  error
}

func (e *ToolError) Error() string { return fmt.Sprintf("tool %s: %v", e.Tool, e.Err) }
func (e *ToolError) Unwrap() error { return e.Err }

// ApprovalRequiredError is returned by the core handler when policy says
// "ask". Hooks must pass it through; the loop persists the approval and
// stops the run as awaiting_approval.
type ApprovalRequiredError struct {
	Decision Decision
	// Child is the approval a child run waits for, when the call is an
	// agent call whose child asked (Approval.Child).
	Child *Approval
}

func (e *ApprovalRequiredError) Error() string {
	if e.Decision.Message != "" {
		return "approval required: " + e.Decision.Message
	}
	return "approval required"
}

// RegistrationError is a tool that could not be registered.
type RegistrationError struct {
	Tool string
	Err  error
}

func (e *RegistrationError) Error() string { return fmt.Sprintf("register tool %q: %v", e.Tool, e.Err) }
func (e *RegistrationError) Unwrap() error { return e.Err }

func timeoutError(tool string, d time.Duration) *ToolError {
	return &ToolError{Tool: tool, Code: toolpkg.CodeTimeout, Err: fmt.Errorf("%w after %s", ErrToolTimeout, d)}
}
