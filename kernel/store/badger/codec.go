package badger

import (
	"encoding/json"
	"errors"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/internal/msgcodec"
)

// The value encodings. A message's value is msgcodec's (shared with the
// postgres store). Meta and pending values are
//
//	[1 byte version] [payload] [4 bytes CRC-32C of version+payload, big-endian]
//
// with the JSON of kernel.SessionMeta and kernel.Approval as their payload
// (version 1): small, read once per session, and free to grow fields.
const (
	metaVersion = 1
	pendVersion = 1
)

// The causes a damaged value is reported with (see msgcodec).
var (
	errTruncated = msgcodec.ErrTruncated
	errChecksum  = msgcodec.ErrChecksum
	// errValueLog is a value whose entry in Badger's value log fails its
	// checksum: Badger answers such a read with no bytes (and a log line)
	// instead of an error, so readValue names it.
	errValueLog = errors.New("damaged on disk: its entry in the value log changed after it was written (checksum mismatch)")
)

var (
	castagnoli    = msgcodec.Castagnoli
	seal          = msgcodec.Seal
	encodeMessage = msgcodec.Append
	decodeMessage = msgcodec.Decode
	encodedSize   = msgcodec.Size
)

func encodeJSON(version byte, v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(j)+5)
	b = append(b, version)
	b = append(b, j...)
	return seal(b, 0), nil
}

func decodeJSON(b []byte, version byte, v any) error {
	p, err := msgcodec.Unseal(b, version)
	if err != nil {
		return err
	}
	return json.Unmarshal(p, v)
}

func encodeMeta(m *kernel.SessionMeta) ([]byte, error) { return encodeJSON(metaVersion, m) }

func decodeMeta(b []byte) (kernel.SessionMeta, error) {
	var m kernel.SessionMeta
	err := decodeJSON(b, metaVersion, &m)
	return m, err
}

func encodePending(a *kernel.Approval) ([]byte, error) { return encodeJSON(pendVersion, a) }

func decodePending(b []byte) (*kernel.Approval, error) {
	var a kernel.Approval
	if err := decodeJSON(b, pendVersion, &a); err != nil {
		return nil, err
	}
	return &a, nil
}
