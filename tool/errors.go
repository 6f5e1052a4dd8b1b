package tool

import (
	"errors"
	"fmt"
)

// The error codes of a failed call: a short machine-readable class the
// kernel puts in kernel.ToolError.Code, the plugin SDK sends over the wire
// and events and session exports carry. A tool may use codes of its own
// too: any string of [a-z0-9_] that is not one of these.
const (
	// Codes a tool returns.
	CodeInvalidArgs      = "invalid_args"
	CodeNotFound         = "not_found"
	CodePermissionDenied = "permission_denied"
	CodeUnavailable      = "unavailable"
	CodeTimeout          = "timeout"
	CodeCancelled        = "cancelled"
	CodePanic            = "panic"
	CodeUnknownTool      = "unknown_tool"
	CodeToolError        = "tool_error"

	// Codes only the kernel sets: the call never reached the tool.
	CodeDenied     = "denied"      // policy said no, or the tool was not offered
	CodeBlocked    = "blocked"     // a hook blocked the call or its result
	CodeHookFailed = "hook_failed" // a fail-closed hook could not run
)

// Error is an error that keeps its code across a process boundary. The
// kernel's plugin host rebuilds an *Error from the wire, so errors.Is(err,
// &Error{Code: CodeNotFound}) holds on the host for an error a plugin tool
// returned as Errorf(CodeNotFound, ...). Two *Errors match under errors.Is
// when their codes are equal.
type Error struct {
	Code    string
	Message string
	// Err is the cause, if any. It does not cross a process boundary: only
	// its text does, as part of Message.
	Err error
}

// Errorf returns an *Error with the given code and a formatted message. A %w
// verb wraps its operand as the cause.
func Errorf(code, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &Error{Code: code, Message: err.Error(), Err: errors.Unwrap(err)}
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// CodeOf returns the code of the first *Error in err's chain, or
// CodeToolError if there is none.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Code != "" {
		return e.Code
	}
	return CodeToolError
}
