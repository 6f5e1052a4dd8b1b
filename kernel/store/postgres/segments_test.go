package postgres_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/postgres"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
)

// segmentHistory is n messages from seq first, in rounds of four: a
// prompt, a call, its result and an answer, all at t0.
func segmentHistory(first, n int, t0 time.Time) []kernel.Message {
	out := make([]kernel.Message, 0, n)
	for seq := first; seq < first+n; seq++ {
		m := kernel.Message{Seq: uint64(seq), Time: t0}
		switch seq % 4 {
		case 1:
			m.Role, m.Content = kernel.RoleUser, fmt.Sprint("prompt ", seq)
		case 2:
			m.Role, m.ToolCalls = kernel.RoleAssistant, []kernel.ToolCall{{ID: fmt.Sprint("c", seq), Name: "read_file", Arguments: `{}`}}
		case 3:
			m.Role, m.ToolCallID, m.ToolName, m.Content = kernel.RoleTool, fmt.Sprint("c", seq-1), "read_file", fmt.Sprint("text ", seq)
		default:
			m.Role, m.Content, m.Model = kernel.RoleAssistant, fmt.Sprint("answer ", seq), "m"
		}
		out = append(out, m)
	}
	return out
}

// segmentDB is a store on a new database, a function running SQL there as
// the superuser, and a connection to read it with.
func segmentDB(t *testing.T) (*postgres.Store, func(sql string, args ...any), *pgx.Conn) {
	s, dsn := openStore(t, postgres.Options{})
	u, _ := url.Parse(dsn)
	db := strings.TrimPrefix(u.Path, "/")
	c, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return s, func(sql string, args ...any) {
		t.Helper()
		if err := pgtest.Shared(t).Exec(db, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}, c
}

// commitAll commits msgs to session id in steps of size at most step.
func commitAll(t *testing.T, s *postgres.Store, id string, msgs []kernel.Message, step int) {
	t.Helper()
	for len(msgs) > 0 {
		n := min(step, len(msgs))
		if err := s.Commit(context.Background(), id, kernel.Step{Messages: msgs[:n], Meta: kernel.SessionMeta{Status: kernel.StatusIdle, Updated: msgs[0].Time}}); err != nil {
			t.Fatal(err)
		}
		msgs = msgs[n:]
	}
}

// segmentRanges is the [first, last] of each of session id's segments,
// in order.
func segmentRanges(t *testing.T, c *pgx.Conn, id string) [][2]int64 {
	t.Helper()
	rows, err := c.Query(context.Background(), `SELECT first_seq, last_seq FROM ak_segments WHERE session_id = $1 ORDER BY first_seq`, id)
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]int64
	for rows.Next() {
		var r [2]int64
		if err := rows.Scan(&r[0], &r[1]); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// loadEqual fails t unless session id loads as want.
func loadEqual(t *testing.T, s *postgres.Store, id string, want []kernel.Message, when string) {
	t.Helper()
	se, err := s.Load(context.Background(), id)
	if err != nil {
		t.Fatalf("%s: Load: %v", when, err)
	}
	if len(se.Messages) != len(want) {
		t.Fatalf("%s: Load read %d messages, want %d", when, len(se.Messages), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(se.Messages[i], want[i]) {
			t.Fatalf("%s: message %d loads as\n%+v\nwant\n%+v", when, i+1, se.Messages[i], want[i])
		}
	}
}

// TestSegmentsPackCommittedRows: the commit that completes a chunk of 256
// messages writes its segment in the same transaction, even when the
// chunk ends inside the step; the segment holds the chunk's rows byte for
// byte (each after its 4-byte length); and Load reads the segments, not
// the rows they copy: with the packed rows deleted by hand, the session
// still loads whole.
func TestSegmentsPackCommittedRows(t *testing.T) {
	ctx := context.Background()
	s, exec, c := segmentDB(t)
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	msgs := segmentHistory(1, 600, t0)
	commitAll(t, s, "s", msgs[:255], 5)
	if got := segmentRanges(t, c, "s"); len(got) != 0 {
		t.Fatalf("segments before a chunk is whole: %v", got)
	}
	commitAll(t, s, "s", msgs[255:], 7) // 256 and 512 end inside steps
	if got, want := segmentRanges(t, c, "s"), [][2]int64{{1, 256}, {257, 512}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("segments %v, want %v", got, want)
	}
	rows, err := c.Query(ctx, `SELECT body FROM ak_messages WHERE session_id = 's' AND seq <= 512 ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	bodies, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil || len(bodies) != 512 {
		t.Fatalf("%d rows, %v", len(bodies), err)
	}
	for k, first := range []int64{1, 257} {
		var seg []byte
		if err := c.QueryRow(ctx, `SELECT body FROM ak_segments WHERE session_id = 's' AND first_seq = $1`, first).Scan(&seg); err != nil {
			t.Fatal(err)
		}
		var want []byte
		for _, b := range bodies[k*256 : (k+1)*256] {
			want = binary.BigEndian.AppendUint32(want, uint32(len(b)))
			want = append(want, b...)
		}
		if !bytes.Equal(seg, want) {
			t.Fatalf("segment %d is not its rows: %d bytes, want %d", first, len(seg), len(want))
		}
	}
	loadEqual(t, s, "s", msgs, "packed")

	exec(`DELETE FROM ak_messages WHERE session_id = 's' AND seq <= 512`)
	loadEqual(t, s, "s", msgs, "the packed rows deleted")
}

// TestSegmentFaultsReadTheRows: a segment that does not read (a flipped
// bit inside a message, a cut body, a length past the end, a range its
// rows do not fill) makes Load read the session from its rows, which are
// the truth, and it loads whole; a damaged row past the segments is still
// reported corrupt.
func TestSegmentFaultsReadTheRows(t *testing.T) {
	s, exec, c := segmentDB(t)
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	msgs := segmentHistory(1, 300, t0)
	commitAll(t, s, "s", msgs, 50)
	if got := segmentRanges(t, c, "s"); len(got) != 1 {
		t.Fatalf("segments %v, want one", got)
	}
	exec(`CREATE TABLE good AS SELECT * FROM ak_segments`)
	for _, damage := range []struct{ name, sql string }{
		{"a bit flipped in a message", `UPDATE ak_segments SET body = set_byte(body, 4000, get_byte(body, 4000) # 1)`},
		{"the body cut", `UPDATE ak_segments SET body = substring(body FROM 1 FOR length(body) - 10)`},
		{"a length past the end", `UPDATE ak_segments SET body = overlay(body PLACING '\x7fffffff'::bytea FROM 1)`},
		{"a message too many", `UPDATE ak_segments SET body = body || int4send(2) || '\x7b7d'::bytea`},
		{"a range past its body", `UPDATE ak_segments SET last_seq = 257`},
	} {
		exec(`DELETE FROM ak_segments`)
		exec(`INSERT INTO ak_segments SELECT * FROM good`)
		exec(damage.sql)
		loadEqual(t, s, "s", msgs, damage.name)
	}
	exec(`UPDATE ak_messages SET body = '\x7b6e6f'::bytea WHERE session_id = 's' AND seq = 290`)
	if _, err := s.Load(context.Background(), "s"); err == nil || !strings.Contains(err.Error(), "290") {
		t.Fatalf("Load with a damaged row past the segments = %v, want it reported", err)
	}
}

// TestSegmentsAfterRepairImportAndDelete: fsck's repair of a row a
// segment copies deletes the session's segments, so Load reads the
// repair (the placeholder), not the copy; the next commit that completes
// a chunk packs the session again from its rows. An import is packed as
// it is stored. A session deleted and made again does not inherit the
// old one's segments. A session without segments (as migration 5 finds
// every session) loads from its rows and is packed at its next chunk.
func TestSegmentsAfterRepairImportAndDelete(t *testing.T) {
	ctx := context.Background()
	s, exec, c := segmentDB(t)
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	msgs := segmentHistory(1, 300, t0)
	commitAll(t, s, "s", msgs, 100)

	exec(`UPDATE ak_messages SET body = '\x7b6e6f'::bytea WHERE session_id = 's' AND seq = 3`)
	f := fsckOne(t, s, "s", false)
	if len(f.Damaged) != 1 || f.Damaged[3] == "" {
		t.Fatalf("fsck of a damaged packed row: %+v", f)
	}
	if f = fsckOne(t, s, "s", true); !f.Repaired {
		t.Fatalf("fsck --repair: %+v", f)
	}
	if got := segmentRanges(t, c, "s"); len(got) != 0 {
		t.Fatalf("segments after the repair: %v", got)
	}
	se, err := s.Load(ctx, "s")
	if err != nil || !strings.Contains(se.Messages[2].Content, "message 3 could not be read") {
		t.Fatalf("Load after the repair: message 3 is %+v, %v", se.Messages[2], err)
	}
	repaired := se.Messages
	more := segmentHistory(301, 300, t0)
	commitAll(t, s, "s", more, 300)
	if got, want := segmentRanges(t, c, "s"), [][2]int64{{1, 256}, {257, 512}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("segments after the next chunk %v, want %v", got, want)
	}
	loadEqual(t, s, "s", append(repaired, more...), "repacked")

	var export bytes.Buffer
	if err := s.Export(ctx, "s", &export); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	id, err := s.Import(ctx, &export)
	if err != nil || id != "s" {
		t.Fatalf("Import = %q, %v", id, err)
	}
	if got, want := segmentRanges(t, c, "s"), [][2]int64{{1, 256}, {257, 512}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("segments of the import %v, want %v", got, want)
	}
	loadEqual(t, s, "s", append(repaired, more...), "imported")

	if err := s.Delete(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if got := segmentRanges(t, c, "s"); len(got) != 0 {
		t.Fatalf("segments of a deleted session: %v", got)
	}
	short := segmentHistory(1, 10, t0.Add(time.Hour))
	commitAll(t, s, "s", short, 10)
	loadEqual(t, s, "s", short, "made again")

	commitAll(t, s, "old", msgs, 300)
	exec(`DELETE FROM ak_segments WHERE session_id = 'old'`)
	loadEqual(t, s, "old", msgs, "no segments")
	commitAll(t, s, "old", more[:250], 250)
	if got, want := segmentRanges(t, c, "old"), [][2]int64{{1, 256}, {257, 512}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("segments of an unpacked session after its next chunk %v, want %v", got, want)
	}
	loadEqual(t, s, "old", append(msgs[:300:300], more[:250]...), "packed at its next chunk")
}
