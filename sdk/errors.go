package sdk

import "github.com/agentkernel/agentkernel/tool"

// The error codes the SDK and the host use (the tool package's). A plugin
// may use its own codes too: any string of [a-z0-9_] that is not one of
// these.
const (
	CodeInvalidArgs      = tool.CodeInvalidArgs
	CodeNotFound         = tool.CodeNotFound
	CodePermissionDenied = tool.CodePermissionDenied
	CodeUnavailable      = tool.CodeUnavailable
	CodeTimeout          = tool.CodeTimeout
	CodeCancelled        = tool.CodeCancelled
	CodePanic            = tool.CodePanic
	CodeUnknownTool      = tool.CodeUnknownTool
	CodeToolError        = tool.CodeToolError
)

// Error is an error that keeps its code across the plugin boundary; it is
// tool.Error. The host rebuilds an *Error from the wire, so
// errors.Is(err, sdk.ErrNotFound) holds on the host for an error a tool
// returned as sdk.Errorf(sdk.CodeNotFound, ...). Two *Errors match under
// errors.Is when their codes are equal.
type Error = tool.Error

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
func Errorf(code, format string, args ...any) error { return tool.Errorf(code, format, args...) }

// CodeOf returns the code of the first *Error in err's chain, or
// CodeToolError if there is none.
func CodeOf(err error) string { return tool.CodeOf(err) }
