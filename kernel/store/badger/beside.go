package badger

import (
	"context"
	"errors"
	"sync"

	"github.com/agentkernel/agentkernel/kernel"
)

// besideState is what a read-only Store reading through a writer's socket
// keeps: the Store it falls back to when that writer goes away.
type besideState struct {
	mu       sync.Mutex
	fallback *Store
}

// local returns the Store to read when the writer stopped answering: the
// store reopened read-only (the writer is gone, or another took over).
func (s *Store) local() (*Store, error) {
	s.beside.mu.Lock()
	defer s.beside.mu.Unlock()
	if s.beside.fallback != nil {
		return s.beside.fallback, nil
	}
	opts := s.opts
	opts.ReadOnly = true
	f, err := Open(s.dir, opts)
	if err != nil {
		return nil, err
	}
	if f.remote != nil { // another writer answers: its socket, but only once
		f.remote.noRetry = true
	}
	s.beside.fallback = f
	return f, nil
}

func (s *Store) remoteList(ctx context.Context) ([]kernel.SessionMeta, error) {
	out, err := s.remote.list(ctx)
	if err != nil && errors.Is(err, errRemoteGone) && !s.remote.noRetry {
		f, ferr := s.local()
		if ferr != nil {
			return nil, errors.Join(err, ferr)
		}
		return f.List(ctx)
	}
	return out, err
}

func (s *Store) remoteLoad(ctx context.Context, id string) (*kernel.Session, error) {
	out, err := s.remote.load(ctx, id)
	if err != nil && errors.Is(err, errRemoteGone) && !s.remote.noRetry {
		f, ferr := s.local()
		if ferr != nil {
			return nil, errors.Join(err, ferr)
		}
		return f.Load(ctx, id)
	}
	return out, err
}

// closeBeside closes the fallback Store, if any.
func (s *Store) closeBeside() error {
	s.beside.mu.Lock()
	defer s.beside.mu.Unlock()
	if s.beside.fallback == nil {
		return nil
	}
	return s.beside.fallback.Close()
}
