//go:build unix

package badger

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bdg "github.com/dgraph-io/badger/v4"

	"github.com/agentkernel/agentkernel/kernel"
)

// churnTune makes the writer compact all the time: tiny memtables and
// tables, so flushes, compactions (which delete tables by truncating
// them) and value-log GC (which deletes value logs) happen every few
// steps.
func churnTune(o bdg.Options) bdg.Options {
	return o.WithMemTableSize(256 << 10).WithBaseTableSize(64 << 10).WithBaseLevelSize(256 << 10).
		WithNumLevelZeroTables(1).WithNumLevelZeroTablesStall(4).WithValueLogFileSize(1 << 20).WithValueThreshold(1 << 10)
}

// helperChurn writes, deletes and reclaims in a loop until stdin closes,
// saying "ready" once the store has tables.
func helperChurn(dir string) error {
	s, err := Open(dir, Options{Logger: quietLogger(), Tune: churnTune, MinFreeBytes: -1})
	if err != nil {
		return err
	}
	ctx := context.Background()
	stop := make(chan struct{})
	go func() {
		_, _ = os.Stdin.Read(make([]byte, 1))
		close(stop)
	}()
	body := strings.Repeat("churn ", 400)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return s.Close()
		default:
		}
		id := fmt.Sprintf("c%04d", i%60)
		_ = s.Delete(ctx, id)
		msgs := make([]kernel.Message, 8)
		for j := range msgs {
			msgs[j] = kernel.Message{Seq: uint64(j + 1), Role: kernel.RoleUser, Content: fmt.Sprintf("%d %d %s", i, j, body)}
		}
		if err := s.Commit(ctx, id, kernel.Step{Messages: msgs, Meta: kernel.SessionMeta{Updated: time.Now()}}); err != nil {
			return err
		}
		if i%15 == 14 {
			if _, err := s.Reclaim(ctx); err != nil {
				return err
			}
		}
		if i == 30 {
			fmt.Println("ready")
		}
	}
}

// helperReads opens the store read-only n times, lists it and loads every
// session, and says how many reads it made.
func helperReads(dir, n string, snapshotOnly bool) error {
	noSocket = snapshotOnly
	count, _ := strconv.Atoi(n)
	ctx := context.Background()
	for i := range count {
		s, err := Open(dir, Options{ReadOnly: true, Logger: quietLogger()})
		if err != nil {
			return fmt.Errorf("read %d: %w", i, err)
		}
		if snapshotOnly && s.snapshot == "" {
			return fmt.Errorf("read %d: not a snapshot", i)
		}
		list, err := s.List(ctx)
		if err != nil {
			return fmt.Errorf("read %d: %w", i, err)
		}
		for _, m := range list {
			if _, err := s.Load(ctx, m.ID); err != nil && !errors.Is(err, kernel.ErrSessionNotFound) {
				return fmt.Errorf("read %d: %w", i, err)
			}
		}
		if err := s.Close(); err != nil {
			return fmt.Errorf("read %d: %w", i, err)
		}
	}
	fmt.Printf("reads %d\n", count)
	return nil
}

// TestReadersAgainstCompactingWriter runs reader processes against a
// writer process that compacts, deletes tables and collects value logs
// all the time: a fixed count of reads, through the writer's socket and
// through snapshots, and not one may fault (a SIGBUS kills the reader:
// the process is the unit of the test). Before the fix, snapshots
// hard-linked tables, which the writer truncates when it deletes them.
func TestReadersAgainstCompactingWriter(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dir := t.TempDir()
	w := helperCmd(t, "churn", "STORE_DIR="+dir)
	stdin, err := w.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := w.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var werr bytes.Buffer
	w.Stderr = &werr
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		_ = w.Wait()
	}()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		_ = w.Process.Kill()
		t.Fatalf("writer said %q, %v; stderr:\n%s", line, err, werr.String())
	}
	const readers, reads = 4, 15
	for _, mode := range []string{"socket", "snapshot"} {
		var wg sync.WaitGroup
		errs := make([]error, readers)
		for r := range readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				env := []string{"STORE_DIR=" + dir, "READS=" + strconv.Itoa(reads)}
				if mode == "snapshot" {
					env = append(env, "NO_SOCKET=1")
				}
				cmd := helperCmd(t, "reads", env...)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				got, err := cmd.Output()
				var ee *exec.ExitError
				switch {
				case errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled():
					errs[r] = fmt.Errorf("reader %d (%s) killed by %v:\n%s", r, mode, ee.Sys().(syscall.WaitStatus).Signal(), stderr.String())
				case err != nil:
					errs[r] = fmt.Errorf("reader %d (%s): %v:\n%s", r, mode, err, stderr.String())
				case string(got) != fmt.Sprintf("reads %d\n", reads):
					errs[r] = fmt.Errorf("reader %d (%s) said %q", r, mode, got)
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the writer died: %v\n%s", err, werr.String())
	}
	t.Logf("%d reads through the socket and %d through snapshots against a compacting writer, no fault", readers*reads, readers*reads)
}
