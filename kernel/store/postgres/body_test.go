package postgres_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/badger"
	"github.com/agentkernel/agentkernel/kernel/store/internal/msgcodec"
	"github.com/agentkernel/agentkernel/kernel/store/postgres"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
)

// TestOldJSONRowsRead: a session whose message rows are the messages'
// JSON, as every kernel before the shared codec wrote them, loads, checks
// clean with fsck and exports as before; a step committed on top of it is
// stored in msgcodec's encoding, and the session loads whole, the old rows
// and the new together. A damaged binary row is reported corrupt, not
// taken for JSON.
func TestOldJSONRowsRead(t *testing.T) {
	ctx := context.Background()
	s, dsn := openStore(t, postgres.Options{})
	u, _ := url.Parse(dsn)
	db := strings.TrimPrefix(u.Path, "/")
	exec := func(sql string, args ...any) {
		t.Helper()
		if err := pgtest.Shared(t).Exec(db, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	old := fsckHistory(t0)
	old[1].Model, old[1].Reasoning = "m", "think"
	exec(`INSERT INTO ak_sessions (id, meta, last_seq, status, updated) VALUES ('s', '{"status":"idle"}', 5, 'idle', now())`)
	for i := range old {
		b, err := json.Marshal(&old[i])
		if err != nil {
			t.Fatal(err)
		}
		exec(`INSERT INTO ak_messages (session_id, seq, body) VALUES ('s', $1, $2)`, int64(i+1), b)
	}
	se, err := s.Load(ctx, "s")
	if err != nil {
		t.Fatalf("Load of a session of JSON rows: %v", err)
	}
	if !reflect.DeepEqual(se.Messages, old) {
		t.Fatalf("JSON rows read as\n%+v\nwant\n%+v", se.Messages, old)
	}
	if f := fsckOne(t, s, "s", false); !f.OK() || f.Messages != 5 {
		t.Fatalf("fsck of a session of JSON rows: %+v", f)
	}
	var fromJSON bytes.Buffer
	if err := s.Export(ctx, "s", &fromJSON); err != nil {
		t.Fatal(err)
	}

	next := kernel.Message{Seq: 6, Role: kernel.RoleUser, Content: "and now?", Time: t0}
	if err := s.Commit(ctx, "s", kernel.Step{Messages: []kernel.Message{next}, Meta: kernel.SessionMeta{Status: kernel.StatusIdle, Updated: t0}}); err != nil {
		t.Fatal(err)
	}
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var body []byte
	if err := c.QueryRow(ctx, `SELECT body FROM ak_messages WHERE session_id = 's' AND seq = 6`).Scan(&body); err != nil {
		t.Fatal(err)
	}
	if len(body) == 0 || body[0] != msgcodec.Version {
		t.Fatalf("a new row starts with %q, want msgcodec's version byte", body[:min(len(body), 8)])
	}
	se, err = s.Load(ctx, "s")
	if err != nil || !reflect.DeepEqual(se.Messages, append(old, next)) {
		t.Fatalf("Load of old and new rows: %+v, %v", se, err)
	}

	// The export of the JSON rows is what the badger store exports for
	// the same history, byte for byte.
	bs, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	if _, err := bs.Import(ctx, bytes.NewReader(fromJSON.Bytes())); err != nil {
		t.Fatalf("the badger store imports the export of JSON rows: %v", err)
	}
	var again bytes.Buffer
	if err := bs.Export(ctx, "s", &again); err != nil || again.String() != fromJSON.String() {
		t.Fatalf("export of JSON rows, through badger:\n%s\nwant\n%s (%v)", again.String(), fromJSON.String(), err)
	}

	exec(`UPDATE ak_messages SET body = set_byte(body, 3, get_byte(body, 3) # 1) WHERE session_id = 's' AND seq = 6`)
	if _, err := s.Load(ctx, "s"); !errors.Is(err, kernel.ErrCorrupt) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("Load with a damaged binary row = %v, want a checksum mismatch", err)
	}
}
