package badger

import (
	"context"
	"errors"
	"fmt"
	"io"

	bdg "github.com/dgraph-io/badger/v4"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/export"
)

// Export writes session id in the export format every store shares
// (package export, schemas/session-export.schema.json). On error the
// output is incomplete.
func (s *Store) Export(ctx context.Context, id string, w io.Writer) error {
	se, err := s.Load(ctx, id)
	if err != nil {
		return fmt.Errorf("export session: %w", err)
	}
	return export.Write(ctx, w, se)
}

// Import reads a session an Export (of any store) wrote, checks all of it
// (export.Read: a problem is an *export.ImportError naming the line), and
// stores it under the id of its header (a new id when the header has
// none). It returns the id. On error nothing is stored; a session with
// the same id fails with kernel.ErrSessionExists.
func (s *Store) Import(ctx context.Context, r io.Reader) (id string, err error) {
	if s.opts.ReadOnly {
		return "", fmt.Errorf("import session: %w", ErrReadOnly)
	}
	h, err := export.Read(ctx, r)
	if err != nil {
		return "", err
	}
	msgs := h.Messages
	id = h.Meta.ID
	if id == "" {
		id = kernel.NewID()
	}
	meta := h.Meta
	meta.ID = id
	metaVal, err := encodeMeta(&meta)
	if err != nil {
		return "", fmt.Errorf("import session %s: %w", id, err)
	}
	var pendVal []byte
	if h.Pending != nil {
		h.Pending.SessionID = id
		if pendVal, err = encodePending(h.Pending); err != nil {
			return "", fmt.Errorf("import session %s: %w", id, err)
		}
	}
	vals := make([][]byte, len(msgs))
	size := int64(len(metaVal) + len(pendVal))
	for i := range msgs {
		vals[i] = encodeMessage(nil, &msgs[i])
		size += int64(len(vals[i]))
	}
	if err := s.checkSpace(size, false); err != nil {
		return "", fmt.Errorf("import session %s: %w", id, err)
	}

	mu := s.locks.of(id)
	mu.Lock()
	defer mu.Unlock()
	err = s.db.View(func(txn *bdg.Txn) error {
		_, err := txn.Get(metaKey(id))
		if err == nil {
			return fmt.Errorf("session %q: %w (remove it first)", id, kernel.ErrSessionExists)
		}
		if errors.Is(err, bdg.ErrKeyNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("import session: %w", err)
	}
	// Messages first, metadata last: until the metadata is written the
	// messages are invisible, so a failed import stores nothing.
	txn := s.db.NewTransaction(true)
	err = s.commitLarge(&txn, id, msgs, vals, func(txn *bdg.Txn) error {
		if pendVal != nil {
			if err := txn.Set(pendingKey(id), pendVal); err != nil {
				return err
			}
		}
		return txn.Set(metaKey(id), metaVal)
	})
	if err == nil {
		err = txn.Commit()
	}
	txn.Discard()
	if err != nil {
		if derr := s.deleteMessages(context.WithoutCancel(ctx), id, 1); derr != nil {
			s.opts.Logger.Warn("could not remove the messages of a failed import; gc will", "session", id, "error", derr)
		}
		return "", fmt.Errorf("import session %s: %w", id, err)
	}
	return id, nil
}
