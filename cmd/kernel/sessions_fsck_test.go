package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
)

// TestSessionsFsckOnPostgres: `kernel sessions fsck` works through the
// store's StoreChecker on PostgreSQL as on Badger: a healthy session is
// ok; a message row deleted by hand is named, with the exit status 1 and
// the hint to repair; --repair stores the placeholder, exits 0, and the
// session exports again.
func TestSessionsFsckOnPostgres(t *testing.T) {
	dir := t.TempDir()
	srv := pgtest.Shared(t)
	dsn := srv.Migrated(t)
	u, _ := url.Parse(dsn)
	t.Setenv("AK_FSCK_DSN", dsn)
	pg := filepath.Join(dir, "pg.yaml")
	if err := os.WriteFile(pg, []byte("store: {kind: postgres, dsn_env: AK_FSCK_DSN}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const golden, id = "../../kernel/store/badger/testdata/export.golden.jsonl", "06h06p6rta3zzj1h"
	badgerDir := filepath.Join(dir, "badger")
	for _, store := range [][]string{{"--config", pg}, {"--store", badgerDir}} {
		if _, errOut, err := cli(t, append([]string{"sessions", "import", golden}, store...)...); err != nil {
			t.Fatalf("import %v: %v\n%s", store, err, errOut)
		}
		if out, errOut, err := cli(t, append([]string{"sessions", "fsck"}, store...)...); err != nil || !strings.HasPrefix(out, "ok       "+id+"  7 messages") {
			t.Fatalf("fsck %v of the imported session: %v\n%s%s", store, err, out, errOut)
		}
	}
	if err := srv.Exec(strings.TrimPrefix(u.Path, "/"), `DELETE FROM ak_messages WHERE session_id = $1 AND seq = 4`, id); err != nil {
		t.Fatal(err)
	}
	code, out, _, msg := status(t, "sessions", "fsck", "--config", pg)
	if code != 1 || !strings.Contains(out, "DAMAGED  "+id) || !strings.Contains(out, "message 4: missing from the store") || !strings.Contains(msg, "fsck --repair") {
		t.Fatalf("fsck of the damaged session: exit %d, %q\n%s", code, msg, out)
	}
	code, out, _, msg = status(t, "sessions", "fsck", "--repair", "--config", pg)
	if code != 0 || !strings.Contains(out, "repaired "+id+"  6 messages, 1 replaced by placeholders") {
		t.Fatalf("fsck --repair: exit %d, %q\n%s", code, msg, out)
	}
	out, errOut, err := cli(t, "sessions", "export", id, "--config", pg)
	if err != nil || !strings.Contains(out, `"seq":4,"role":"tool"`) || !strings.Contains(out, "the result of this call was lost") {
		t.Fatalf("export after the repair: %v\n%s%s", err, out, errOut)
	}
}

// TestStoreDriverKey: `store.driver` names the store (the and the
// docs' spelling); `kind`, its first name, is still read; the two set to
// different stores is refused naming both, never guessed.
func TestStoreDriverKey(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ store, want string }{
		{"{driver: memory}", ""},
		{"{kind: memory}", ""},
		{"{driver: memory, kind: memory}", ""},
		{"{driver: postgres, kind: badger}", `store.driver is "postgres" but store.kind is "badger"`},
		{"{driver: postgres}", "store.dsn_env"},
	} {
		cfg := filepath.Join(dir, "kernel.yaml")
		if err := os.WriteFile(cfg, []byte("store: "+c.store+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, _, msg := status(t, "sessions", "ls", "--config", cfg)
		if c.want == "" && code != 0 || c.want != "" && (code == 0 || !strings.Contains(msg, c.want) || !strings.Contains(msg, "kernel.yaml: store.")) {
			t.Errorf("store %s: exit %d, %q\n%s", c.store, code, msg, out)
		}
	}
}
