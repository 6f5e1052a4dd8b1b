package badger

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
)

// helperDiskFull runs one session whose tool calls and results are 256
// KiB each until the disk is full, then closes the store. It prints its acks, then
// "run error: ..." with the run's stop reason, then "closed".
func helperDiskFull(dir, minFree string) error {
	opts := Options{Logger: quietLogger(), GCInterval: -1}
	if minFree != "" {
		n, err := strconv.ParseInt(minFree, 10, 64)
		if err != nil {
			return fmt.Errorf("MIN_FREE: %w", err)
		}
		opts.MinFreeBytes = n
	}
	s, err := Open(dir, opts)
	if err != nil {
		return err
	}
	reg := kernel.NewRegistry()
	if err := reg.Register(kerneltest.EchoTool("echo")); err != nil {
		return err
	}
	var script []kerneltest.Reply
	for i := range 400 {
		script = append(script, kerneltest.Calls("echo", map[string]string{"text": strings.Repeat(string(rune('a'+i%26)), 256<<10)}))
	}
	k, err := kernel.New(kernel.Config{Provider: kerneltest.NewProvider(script...), Store: &ackStore{Store: s}, Tools: reg, MaxTurns: 400})
	if err != nil {
		return err
	}
	res, err := k.Run(context.Background(), "", "fill the disk")
	if err == nil {
		return fmt.Errorf("the run ended with %s without filling the disk", res.StopReason)
	}
	fmt.Printf("run error: stop=%s session=%s: %v\n", res.StopReason, res.SessionID, err)
	if err := s.Close(); err != nil {
		return err
	}
	fmt.Println("closed")
	return nil
}

// mountTmpfs mounts a tmpfs of size bytes at a new directory, unmounted
// at the end of the test. It skips the test where mounting is not allowed.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (needs root): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fillTo allocates a file in dir that leaves free bytes free.
func fillTo(t *testing.T, dir string, free int64) string {
	t.Helper()
	have, ok := freeBytes(dir)
	if !ok || have <= free {
		t.Fatalf("%s has %d bytes free, want more than %d", dir, have, free)
	}
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, have-free); err != nil {
		t.Fatal(err)
	}
	return path
}

// runDiskFull runs the disk-full helper on a 96 MiB tmpfs filled to
// leave free bytes, then frees the space and returns the helper's output,
// its wait status, its acks, and the store directory.
func runDiskFull(t *testing.T, minFree string, free int64) (out string, ws syscall.WaitStatus, acks []ack, dir string) {
	t.Parallel()
	mnt := mountTmpfs(t, 96<<20)
	dir = filepath.Join(mnt, "store")
	filler := fillTo(t, mnt, free)
	cmd := helperCmd(t, "diskfull", "STORE_DIR="+dir, "MIN_FREE="+minFree)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run()
	ws, _ = cmd.ProcessState.Sys().(syscall.WaitStatus)
	sc := bufio.NewScanner(&stdout)
	var rest []string
	for sc.Scan() {
		if a, ok := parseAck(sc.Text()); ok {
			acks = append(acks, a)
		} else {
			rest = append(rest, sc.Text())
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	return strings.Join(rest, "\n") + "\n" + stderr.String(), ws, acks, dir
}

// TestDiskFull fills a real (tmpfs) file system under a running session:
// the commit that does not fit fails with ErrDiskFull, the kernel turns it
// into a failed run, the process closes the store normally, and after the
// space is freed every acknowledged step is there and the session resumes.
func TestDiskFull(t *testing.T) {
	out, ws, acks, dir := runDiskFull(t, "", cliTuning.reserve()+4<<20)
	if ws.Signaled() || ws.ExitStatus() != 0 {
		t.Fatalf("helper died (%v, exit %d):\n%s", ws.Signal(), ws.ExitStatus(), out)
	}
	if !strings.Contains(out, "stop=error") || !strings.Contains(out, ErrDiskFull.Error()) || !strings.Contains(out, "closed") {
		t.Fatalf("want a run failing with %q and a clean close; got:\n%s", ErrDiskFull, out)
	}
	if len(acks) < 5 {
		t.Fatalf("only %d steps acknowledged before the disk was full:\n%s", len(acks), out)
	}
	t.Logf("%d steps acknowledged; helper said:\n%s", len(acks), out)

	s := openAt(t, dir, Options{})
	ctx := context.Background()
	se, err := s.Load(ctx, acks[0].id)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkAcks(se, acks); err != nil {
		t.Fatal(err)
	}
	if se.Meta.Status != kernel.StatusFailed {
		t.Errorf("status = %s, want %s (the failed run records it from the reserve)", se.Meta.Status, kernel.StatusFailed)
	}
	k, err := kernel.New(kernel.Config{Provider: kerneltest.NewProvider(kerneltest.Text("back")), Store: s})
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(ctx, se.Meta.ID, "space is free again")
	if err != nil || res.Output != "back" {
		t.Fatalf("resume after freeing space: %v, %+v", err, res)
	}
	se, err = s.Load(ctx, se.Meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	if open, err := checkToolResults(se.Messages); err != nil || open != 0 {
		t.Fatalf("after resume: %d open calls, %v", open, err)
	}
}

// TestDiskFullWithoutReserve shows why MinFreeBytes exists, and what is
// still guaranteed without it: Badger writes through memory-mapped files,
// and on a full file system a write to a mapped page raises SIGBUS, which
// kills the process (today, in the value log). Even then every
// acknowledged step is on disk.
func TestDiskFullWithoutReserve(t *testing.T) {
	out, ws, acks, dir := runDiskFull(t, "-1", 6<<20)
	died := ws.ExitStatus() == 2 && strings.Contains(out, "SIGBUS")
	t.Logf("without the reserve: exit %d, died of SIGBUS: %t, %d steps acknowledged", ws.ExitStatus(), died, len(acks))
	if !died && !strings.Contains(out, "stop=error") {
		t.Fatalf("the helper neither failed its run nor died of SIGBUS:\n%.3000s", out)
	}
	if len(acks) == 0 {
		t.Fatalf("nothing acknowledged:\n%.3000s", out)
	}
	s := openAt(t, dir, Options{})
	se, err := s.Load(context.Background(), acks[0].id)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkAcks(se, acks); err != nil {
		t.Fatal(err)
	}
}
