//go:build unix

package badger

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bdg "github.com/dgraph-io/badger/v4"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
)

// The tests re-run the test binary as a helper process (go-plugin's
// TestHelperProcess pattern): a real second process that holds the store,
// gets killed, or fills the disk.
const helperEnv = "AGENTKERNEL_STORE_HELPER"

// helperCmd returns the command that runs this test binary as the helper
// in mode with env (KEY=VALUE pairs).
func helperCmd(t testing.TB, mode string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	// GORACE: a race-enabled binary otherwise sleeps a second at exit.
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "GORACE=atexit_sleep_ms=0")
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// TestHelperProcess is not a test: it is the helper process's main.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("helper process only")
	}
	var err error
	switch mode {
	case "crash":
		err = helperCrash(os.Getenv("STORE_DIR"), os.Getenv("SEED"))
	case "open":
		err = helperOpen(os.Getenv("STORE_DIR"), os.Getenv("READ_ONLY") == "1")
	case "hold":
		err = helperHold(os.Getenv("STORE_DIR"))
	case "churn":
		err = helperChurn(os.Getenv("STORE_DIR"))
	case "reads":
		err = helperReads(os.Getenv("STORE_DIR"), os.Getenv("READS"), os.Getenv("NO_SOCKET") == "1")
	case "diskfull":
		err = helperDiskFull(os.Getenv("STORE_DIR"), os.Getenv("MIN_FREE"))
	default:
		err = fmt.Errorf("unknown helper mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// ackStore reports every acknowledged step on stdout, after Commit
// returned: "ack <session> <first seq> <last seq> <digest>". One line is
// one write(2) of less than PIPE_BUF bytes, so a line in the pipe is
// always whole, and a kill right after Commit returns only loses the
// report (the parent then knows less than was acknowledged, never more).
type ackStore struct {
	kernel.Store
	mu sync.Mutex
}

func (a *ackStore) Commit(ctx context.Context, id string, step kernel.Step) error {
	if err := a.Store.Commit(ctx, id, step); err != nil {
		return err
	}
	if n := len(step.Messages); n > 0 {
		line := fmt.Sprintf("ack %s %d %d %016x\n", id, step.Messages[0].Seq, step.Messages[n-1].Seq, digest(step.Messages))
		a.mu.Lock()
		_, err := os.Stdout.WriteString(line)
		a.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// digest fingerprints what a model would see of msgs.
func digest(msgs []kernel.Message) uint64 {
	h := fnv.New64a()
	for _, m := range msgs {
		fmt.Fprintf(h, "%d|%s|%s|%s|%s|%t|", m.Seq, m.Role, m.Content, m.ToolCallID, m.ToolName, m.IsError)
		for _, c := range m.ToolCalls {
			fmt.Fprintf(h, "%s/%s/%s|", c.ID, c.Name, c.Arguments)
		}
	}
	return h.Sum64()
}

// crashTools are the tools of the crash test: two read-only echoes (they
// run concurrently) and a side-effecting recorder (it runs alone), slow
// enough that kills land while calls are running.
func crashTools() (*kernel.Registry, error) {
	reg := kernel.NewRegistry()
	rec := kerneltest.NewRecorder("write_note", kernel.TierSideEffecting, "noted")
	rec.Delay = 2 * time.Millisecond
	for _, tool := range []kernel.Tool{kerneltest.EchoTool("echo"), kerneltest.EchoTool("echo2"), rec} {
		if err := reg.Register(tool); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// crashOptions are the options of the crash test's store: a 2 MiB
// memtable, so memtables rotate and flush often and a round of 24 results
// of 15 KiB (360 KiB) is more than one transaction holds (15% of it).
func crashOptions() Options {
	return Options{Logger: quietLogger(), GCInterval: -1, Tune: func(o bdg.Options) bdg.Options {
		return o.WithMemTableSize(2 << 20)
	}}
}

// crashScript is one run's model replies: rounds of tool calls, then an
// answer. Texts range from a few bytes to 20 KiB (past the value
// threshold, so some values live in the value log), and now and then a
// round is too big for one transaction.
func crashScript(rng *rand.Rand) []kerneltest.Reply {
	text := func() string {
		n := rng.IntN(64)
		if rng.IntN(10) == 0 {
			n = 16<<10 + rng.IntN(4<<10)
		}
		return strings.Repeat(string(rune('a'+rng.IntN(26))), n+1)
	}
	var out []kerneltest.Reply
	for range rng.IntN(3) + 1 {
		var args []any
		if rng.IntN(20) == 0 {
			for range 24 {
				args = append(args, "echo", map[string]string{"text": strings.Repeat("z", 15<<10)})
			}
		} else {
			for range rng.IntN(4) + 1 {
				name := []string{"echo", "echo2", "write_note"}[rng.IntN(3)]
				args = append(args, name, map[string]string{"text": text()})
			}
		}
		out = append(out, kerneltest.Calls(args...))
	}
	return append(out, kerneltest.Text("done: "+text()))
}

// helperCrash runs scripted, tool-using sessions in two workers, new ones
// and continued ones, until it is killed.
func helperCrash(dir, seed string) error {
	n, err := strconv.ParseUint(seed, 10, 64)
	if err != nil {
		return fmt.Errorf("SEED: %w", err)
	}
	s, err := Open(dir, crashOptions())
	if err != nil {
		return err
	}
	reg, err := crashTools()
	if err != nil {
		return err
	}
	store := &ackStore{Store: s}
	errs := make(chan error, 2)
	for w := range 2 {
		// Worker w continues only the sessions it started (their title is
		// their first prompt), so no session ever has two runs at once.
		tag := fmt.Sprintf("w%d ", w)
		go func() {
			rng := rand.New(rand.NewPCG(n, uint64(w)))
			ctx := context.Background()
			for {
				id := ""
				if rng.IntN(3) != 0 {
					list, err := s.List(ctx)
					if err != nil {
						errs <- err
						return
					}
					var mine []string
					for _, m := range list {
						if strings.HasPrefix(m.Title, tag) {
							mine = append(mine, m.ID)
						}
					}
					if len(mine) > 0 {
						id = mine[rng.IntN(len(mine))]
					}
				}
				k, err := kernel.New(kernel.Config{Provider: kerneltest.NewProvider(crashScript(rng)...), Store: store, Tools: reg, MaxTurns: 10})
				if err != nil {
					errs <- err
					return
				}
				if _, err := k.Run(ctx, id, tag+"prompt"); err != nil {
					errs <- fmt.Errorf("run %q: %w", id, err)
					return
				}
			}
		}()
	}
	return <-errs
}

// helperOpen opens the store and prints its sessions and their lengths,
// or prints the error (and exits with 4 for ErrLocked).
func helperOpen(dir string, readOnly bool) error {
	s, err := Open(dir, Options{ReadOnly: readOnly, Logger: quietLogger()})
	if err != nil {
		fmt.Println(err)
		if errors.Is(err, ErrLocked) {
			os.Exit(4)
		}
		return err
	}
	list, err := s.List(context.Background())
	if err != nil {
		return err
	}
	for _, m := range list {
		se, err := s.Load(context.Background(), m.ID)
		if err != nil {
			return err
		}
		fmt.Printf("%s %d\n", m.ID, len(se.Messages))
	}
	return s.Close()
}

// helperHold opens the store, says "ready" and holds it until stdin
// closes.
func helperHold(dir string) error {
	s, err := Open(dir, Options{Logger: quietLogger()})
	if err != nil {
		return err
	}
	fmt.Println("ready")
	_, _ = os.Stdin.Read(make([]byte, 1))
	return s.Close()
}
