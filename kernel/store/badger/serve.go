package badger

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// Reading while a writer runs. A read-write Store serves reads on a Unix
// socket in its directory (SocketName); a read-only Open of a store that a
// writer holds connects to it, and its List, Load and Export go through
// the writer's own database. No reader maps a file of the store the writer
// may truncate (Badger truncates a table to zero bytes before deleting
// it, which is a SIGBUS for any process that has it mapped), and a read
// costs what it returns, not what the store holds.
//
// The socket is authenticated by the file system: the store directory is
// 0700 (see checkDirMode) and the socket 0600, and on Linux the server
// also checks the peer's uid (SO_PEERCRED) against its own.
//
// The protocol is one request per connection: a JSON line
// {"op":"list"|"load","id":…}, answered by frames of a uvarint length and
// that many bytes, in the store's own value encoding (codec.go):
//
//	error: "E", kind ("notfound", "corrupt" or ""), message
//	list:  "L", then one meta per frame, then an empty frame
//	load:  "S", meta, pending (empty when none), then per message the
//	       seq (8 bytes, big-endian) and its encoding, then an empty frame
//
// A message that cannot be read is sent as the placeholder Load gives it.
const SocketName = "reader.sock"

// rpcTimeout bounds one request on both sides.
const rpcTimeout = 2 * time.Minute

type rpcRequest struct {
	Op string `json:"op"`
	ID string `json:"id,omitempty"`
}

// server is a read-write Store's reader socket.
type server struct {
	ln   net.Listener
	path string
	wg   sync.WaitGroup
}

// serve starts the reader socket of s. A store without one (a path too
// long for a socket address, a file system without sockets) still works:
// its readers take a snapshot instead, and the reason is logged.
func (s *Store) serve() {
	path := filepath.Join(s.dir, SocketName)
	if len(path) > 100 { // sun_path is 104 bytes on BSDs, 108 on Linux
		s.opts.Logger.Debug("store path too long for the reader socket; readers will copy", "dir", s.dir)
		return
	}
	_ = os.Remove(path) // ours: this process holds the store's lock
	ln, err := net.Listen("unix", path)
	if err != nil {
		s.opts.Logger.Warn("cannot serve readers; they will copy the store", "dir", s.dir, "error", err)
		return
	}
	_ = os.Chmod(path, 0o600)
	srv := &server{ln: ln, path: path}
	s.srv = srv
	srv.wg.Add(1)
	go func() {
		defer srv.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed
			}
			srv.wg.Add(1)
			go func() {
				defer srv.wg.Done()
				defer c.Close()
				s.handle(c)
			}()
		}
	}()
}

// stopServing closes the socket and waits for the requests in flight.
func (s *Store) stopServing() {
	if s.srv == nil {
		return
	}
	_ = s.srv.ln.Close()
	s.srv.wg.Wait()
	_ = os.Remove(s.srv.path)
}

func (s *Store) handle(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(rpcTimeout))
	if !samePeer(c) {
		return
	}
	line, err := bufio.NewReaderSize(c, 4096).ReadSlice('\n')
	if err != nil {
		return
	}
	var req rpcRequest
	if err := json.Unmarshal(line, &req); err != nil {
		return
	}
	w := bufio.NewWriterSize(c, 64<<10)
	defer w.Flush()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	switch req.Op {
	case "list":
		list, err := s.List(ctx)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeFrame(w, []byte("L"))
		for i := range list {
			b, err := encodeMeta(&list[i])
			if err != nil {
				return // the client sees a truncated answer
			}
			writeFrame(w, b)
		}
		writeFrame(w, nil)
	case "load":
		se, err := s.Load(ctx, req.ID)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeFrame(w, []byte("S"))
		b, err := encodeMeta(&se.Meta)
		if err != nil {
			return
		}
		writeFrame(w, b)
		var pend []byte
		if se.Pending != nil {
			if pend, err = encodePending(se.Pending); err != nil {
				return
			}
		}
		writeFrame(w, pend)
		var buf []byte
		for i := range se.Messages {
			buf = binary.BigEndian.AppendUint64(buf[:0], se.Messages[i].Seq)
			buf = encodeMessage(buf, &se.Messages[i])
			writeFrame(w, buf)
		}
		writeFrame(w, nil)
	default:
		writeErr(w, fmt.Errorf("unknown request %q", req.Op))
	}
}

func writeFrame(w *bufio.Writer, b []byte) {
	var n [binary.MaxVarintLen64]byte
	_, _ = w.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
	_, _ = w.Write(b)
}

func writeErr(w *bufio.Writer, err error) {
	kind := ""
	switch {
	case errors.Is(err, kernel.ErrSessionNotFound):
		kind = "notfound"
	case errors.Is(err, kernel.ErrCorrupt):
		kind = "corrupt"
	}
	writeFrame(w, []byte("E"))
	writeFrame(w, []byte(kind))
	writeFrame(w, []byte(err.Error()))
}

// remote is a read-only Store's connection to the writer's socket.
type remote struct {
	path    string
	noRetry bool // a fallback's remote: errors are final
}

// dialRemote returns the writer's reader socket in dir, if it answers.
func dialRemote(dir string) (*remote, bool) {
	path := filepath.Join(dir, SocketName)
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, false
	}
	_ = c.Close()
	return &remote{path: path}, true
}

// errRemoteGone is a request the writer did not answer (it closed the
// store meanwhile).
var errRemoteGone = errors.New("the kernel holding the store stopped answering")

// call sends req and returns a frame reader over the answer, whose first
// frame (the kind) it has checked against want.
func (r *remote) call(ctx context.Context, req rpcRequest, want string) (*frameReader, func(), error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", r.path)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errRemoteGone, err)
	}
	deadline := time.Now().Add(rpcTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.SetDeadline(deadline)
	b, _ := json.Marshal(req)
	if _, err := c.Write(append(b, '\n')); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("%w: %w", errRemoteGone, err)
	}
	fr := &frameReader{r: bufio.NewReaderSize(c, 64<<10)}
	kind, err := fr.next()
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("%w: %w", errRemoteGone, err)
	}
	switch string(kind) {
	case want:
		return fr, func() { c.Close() }, nil
	case "E":
		defer c.Close()
		k, _ := fr.next()
		msg, _ := fr.next()
		switch string(k) {
		case "notfound":
			return nil, nil, fmt.Errorf("%s (from the running kernel): %w", msg, kernel.ErrSessionNotFound)
		case "corrupt":
			return nil, nil, fmt.Errorf("%s (from the running kernel): %w", msg, kernel.ErrCorrupt)
		}
		return nil, nil, fmt.Errorf("%s (from the running kernel)", msg)
	}
	c.Close()
	return nil, nil, fmt.Errorf("%w: unexpected answer %q", errRemoteGone, kind)
}

type frameReader struct {
	r   *bufio.Reader
	buf []byte
}

// next returns the next frame, valid until the following call.
func (f *frameReader) next() ([]byte, error) {
	n, err := binary.ReadUvarint(f.r)
	if err != nil {
		return nil, err
	}
	if n > 1<<31 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	if uint64(cap(f.buf)) < n {
		f.buf = make([]byte, n)
	}
	f.buf = f.buf[:n]
	_, err = io.ReadFull(f.r, f.buf)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return f.buf, err
}

func (r *remote) list(ctx context.Context) ([]kernel.SessionMeta, error) {
	fr, done, err := r.call(ctx, rpcRequest{Op: "list"}, "L")
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer done()
	var out []kernel.SessionMeta
	for {
		b, err := fr.next()
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w: %w", errRemoteGone, err)
		}
		if len(b) == 0 {
			return out, nil
		}
		m, err := decodeMeta(b)
		if err != nil {
			return nil, fmt.Errorf("list sessions: from the running kernel: %w", err)
		}
		out = append(out, m)
	}
}

func (r *remote) load(ctx context.Context, id string) (*kernel.Session, error) {
	fr, done, err := r.call(ctx, rpcRequest{Op: "load", ID: id}, "S")
	if err != nil {
		if errors.Is(err, errRemoteGone) {
			return nil, fmt.Errorf("load session: %w", err)
		}
		return nil, err
	}
	defer done()
	fail := func(err error) (*kernel.Session, error) {
		return nil, fmt.Errorf("load session %s: %w: %w", id, errRemoteGone, err)
	}
	b, err := fr.next()
	if err != nil {
		return fail(err)
	}
	meta, err := decodeMeta(b)
	if err != nil {
		return fail(err)
	}
	se := &kernel.Session{Meta: meta}
	if b, err = fr.next(); err != nil {
		return fail(err)
	}
	if len(b) > 0 {
		if se.Pending, err = decodePending(b); err != nil {
			return fail(err)
		}
	}
	for {
		b, err := fr.next()
		if err != nil {
			return fail(err)
		}
		if len(b) == 0 {
			return se, nil
		}
		if len(b) < 8 {
			return fail(errTruncated)
		}
		m := kernel.Message{Seq: binary.BigEndian.Uint64(b)}
		if err := decodeMessage(b[8:], &m); err != nil {
			return fail(err)
		}
		se.Messages = append(se.Messages, m)
	}
}
