package badger

import (
	"encoding/binary"
	"sync"
)

// The key layout (DESIGN.md §7). Every key of a session starts with
// "s/<id>/", and ids never contain '/', so one session's keys are contiguous
// and sort as: messages ("m/" + seq), then "meta", then "pending".
//
//	s/<id>/m/<seq, 8-byte big-endian>   one message
//	s/<id>/meta                         SessionMeta (the commit point)
//	s/<id>/pending                      the pending approval, if any
const (
	keyPrefix  = "s/"
	metaSuffix = "/meta"
	pendSuffix = "/pending"
	msgInfix   = "/m/"
)

// sessionEnd is the first key after every key of session id: "s/<id>0"
// ('0' follows '/').
func sessionEnd(id string) []byte { return []byte(keyPrefix + id + "0") }

func metaKey(id string) []byte    { return []byte(keyPrefix + id + metaSuffix) }
func pendingKey(id string) []byte { return []byte(keyPrefix + id + pendSuffix) }
func msgPrefix(id string) []byte  { return []byte(keyPrefix + id + msgInfix) }

func msgKey(id string, seq uint64) []byte {
	k := make([]byte, 0, len(keyPrefix)+len(id)+len(msgInfix)+8)
	k = append(k, keyPrefix...)
	k = append(k, id...)
	k = append(k, msgInfix...)
	return binary.BigEndian.AppendUint64(k, seq)
}

// parseMsgSeq returns the sequence number of a message key with prefix p.
func parseMsgSeq(key, p []byte) (uint64, bool) {
	if len(key) != len(p)+8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(key[len(p):]), true
}

// idOf returns the session id of any session key, or false.
func idOf(key []byte) (string, bool) {
	if len(key) < len(keyPrefix)+2 || string(key[:len(keyPrefix)]) != keyPrefix {
		return "", false
	}
	rest := key[len(keyPrefix):]
	for i, c := range rest {
		if c == '/' {
			if i == 0 {
				return "", false
			}
			return string(rest[:i]), true
		}
	}
	return "", false
}

// locks serialises the writers of one session: Commit's read of LastSeq,
// check and write must not interleave with another Commit, Delete or Import
// of the same session. Ids hash onto a fixed set of mutexes, so memory stays
// bounded however many sessions there are; two sessions that share a stripe
// only queue behind each other.
type locks [64]sync.Mutex

func (l *locks) of(id string) *sync.Mutex {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * 16777619
	}
	return &l[h%uint32(len(l))]
}
