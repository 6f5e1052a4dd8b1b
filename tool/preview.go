package tool

import (
	"context"
	"encoding/json"
)

// Previewer is an optional interface of a Tool: Preview tells what a call
// with args would do if it ran now, without doing it. Whatever shows a
// call to a person who approves it (the serve inbox, `kernel approve`,
// `kernel mcp serve`'s elicitation) shows the preview when the tool has
// one, and the arguments alone when it has none (a tool that does not
// implement Previewer, or one whose Preview returns an error).
//
// A preview must be computed by the code that performs the call, on the
// same arguments, so that the two cannot disagree: the same checks
// (a call the tool would refuse is previewed as refused, with the error
// the model would read) and the same change (a diff of the file the call
// would write, the request it would send). Preview must only read, must
// honour ctx, and must put no secret in the Preview (it is shown to
// approvers and may be sent to a browser). It must be safe for concurrent
// use. A preview describes the world as it is when it is computed: a file
// that changes before the approved call runs changes what the call does.
//
// The error is for a preview that cannot be made at all (ctx done, say);
// a call the tool would refuse is a Preview with Refused set.
type Previewer interface {
	Preview(ctx context.Context, args json.RawMessage) (Preview, error)
}

// Preview is what a call would do, as the tool's Previewer tells it.
type Preview struct {
	// Summary says in one line what the call would do ("replace 1 line
	// at line 3 of notes.md") or, when Refused, the error the call would
	// fail with, as the model would read it.
	Summary string `json:"summary"`
	// Refused: the tool would refuse the call as things stand, changing
	// nothing.
	Refused bool `json:"refused,omitempty"`
	// Files are the files the call would create or change, with their
	// diffs.
	Files []FileChange `json:"files,omitempty"`
	// Request is the request the call would send (a declared HTTP tool).
	Request *Request `json:"request,omitempty"`
}

// FileChange is one file a call would create or change.
type FileChange struct {
	// Path is the file's path as the tool names it (relative to its
	// workspace for the built-in tools).
	Path string `json:"path"`
	// Created: the file does not exist yet.
	Created bool `json:"created,omitempty"`
	// Diff is the change exactly as `diff -u` prints it, labelled
	// a/Path and b/Path (/dev/null for a created file), so that
	// `patch -p1` applies it: "--- a/notes.md\n+++ b/notes.md\n@@ ...".
	// Empty when the call changes nothing, or when Note says why no
	// diff is shown (a binary file, a file too big to show).
	Diff string `json:"diff,omitempty"`
	// Note qualifies the change or says why there is no diff ("binary
	// file: 2 MiB replaced by 3 bytes").
	Note string `json:"note,omitempty"`
}

// Request is a request a call would send.
type Request struct {
	Method string `json:"method"`
	URL    string `json:"url"`
	// Header holds the request's header fields as the tool would send
	// them, except that the value of a field carrying a secret is
	// replaced by a placeholder naming where it comes from.
	Header map[string][]string `json:"header,omitempty"`
	// Body is the request body when it is text; BodyNote says what it is
	// otherwise ("binary, 4 KiB"), or that Body was cut.
	Body     string `json:"body,omitempty"`
	BodyNote string `json:"body_note,omitempty"`
}

// PreviewOf asks t for a preview of a call with args: nil and no error
// when t is no Previewer (show the arguments alone).
func PreviewOf(ctx context.Context, t Tool, args json.RawMessage) (*Preview, error) {
	p, ok := t.(Previewer)
	if !ok {
		return nil, nil
	}
	pv, err := p.Preview(ctx, args)
	if err != nil {
		return nil, err
	}
	return &pv, nil
}
