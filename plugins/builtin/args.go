package builtin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentkernel/agentkernel/kernel"
)

// decodeArgs decodes a tool's arguments strictly: one JSON object, no
// unknown fields. The kernel validates against the schema before Call;
// this protects callers that call a tool directly.
func decodeArgs(args json.RawMessage, v any) error {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", kernel.ErrInvalidArgs, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: trailing data after the arguments object", kernel.ErrInvalidArgs)
	}
	return nil
}

// invalidArg is an argument the schema would have rejected.
func invalidArg(field, format string, a ...any) error {
	return fmt.Errorf("%w: /%s: %s", kernel.ErrInvalidArgs, field, fmt.Sprintf(format, a...))
}

// cutLine shortens s to at most n bytes on a rune boundary and says how
// much was cut.
func cutLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + fmt.Sprintf(" … [line truncated: %d more bytes]", len(s)-i)
}

// validText makes b safe to hand to the model as a JSON string.
func validText(b []byte) string {
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
