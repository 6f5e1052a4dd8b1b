package sdk

import (
	"errors"
	"fmt"
)

// The error codes the SDK and the host use. A plugin may use its own codes
// too: any string of [a-z0-9_] that is not one of these.
const (
	CodeInvalidArgs      = "invalid_args"
	CodeNotFound         = "not_found"
	CodePermissionDenied = "permission_denied"
	CodeUnavailable      = "unavailable"
	CodeTimeout          = "timeout"
	CodeCancelled        = "cancelled"
	CodePanic            = "panic"
	CodeUnknownTool      = "unknown_tool"
	CodeToolError        = "tool_error"
)

// Error is an error that keeps its code across the plugin boundary. The host
// rebuilds an *Error from the wire, so errors.Is(err, sdk.ErrNotFound) holds
// on the host for an error a tool returned as sdk.Errorf(sdk.CodeNotFound,
// ...). Two *Errors match under errors.Is when their codes are equal.
type Error struct {
	Code    string
	Message string
	// Err is the cause, if any. It does not cross the boundary: only its
	// text does, as part of Message.
	Err error
}

// The sentinel errors, one per standard code. Match them with errors.Is;
// create errors with Errorf.
var (
	ErrInvalidArgs      = &Error{Code: CodeInvalidArgs, Message: "invalid arguments"}
	ErrNotFound         = &Error{Code: CodeNotFound, Message: "not found"}
	ErrPermissionDenied = &Error{Code: CodePermissionDenied, Message: "permission denied"}
	ErrUnavailable      = &Error{Code: CodeUnavailable, Message: "unavailable"}
	ErrTimeout          = &Error{Code: CodeTimeout, Message: "timed out"}
	ErrCancelled        = &Error{Code: CodeCancelled, Message: "cancelled"}
	ErrPanic            = &Error{Code: CodePanic, Message: "panicked"}
	ErrUnknownTool      = &Error{Code: CodeUnknownTool, Message: "unknown tool"}
)

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
