package postgres

import (
	"encoding/json"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/internal/msgcodec"
)

// A message's row (ak_messages.body) holds the message in msgcodec's
// binary encoding, the badger store's. Rows written before it hold the
// message's JSON, which starts with '{' where msgcodec's first byte is its
// version: both are read, so no migration rewrites old rows
// (RATIONALE.md, "One message codec for both stores").

// encodeBody is the row of message m.
func encodeBody(m *kernel.Message) []byte {
	return msgcodec.Append(make([]byte, 0, msgcodec.Size(m)), m)
}

// decodeBody decodes a message's row, of either encoding, into m (its Seq
// is the row's, set by the caller).
func decodeBody(b []byte, m *kernel.Message) error {
	if msgcodec.IsJSON(b) {
		return json.Unmarshal(b, m)
	}
	return msgcodec.Decode(b, m)
}
