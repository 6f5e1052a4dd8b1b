package badger_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	badgerstore "github.com/agentkernel/agentkernel/kernel/store/badger"
)

// A run in one process, its resume in the next: the store is the kernel's
// memory across processes.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sessions")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := badgerstore.Open(dir, badgerstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	k, err := kernel.New(kernel.Config{Provider: kerneltest.NewProvider(kerneltest.Text("Hello!")), Store: store})
	if err != nil {
		log.Fatal(err)
	}
	res, err := k.Run(ctx, "", "Say hello")
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Close(); err != nil {
		log.Fatal(err)
	}

	// Later, another process:
	store, err = badgerstore.Open(dir, badgerstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	se, err := store.Load(ctx, res.SessionID)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range se.Messages {
		fmt.Println(m.Seq, m.Role, m.Content)
	}
	fmt.Println(se.Meta.Status, se.Meta.Turns, "turn")
	// Output:
	// 1 user Say hello
	// 2 assistant Hello!
	// idle 1 turn
}

func ExampleStore_Export() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sessions")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := badgerstore.Open(dir, badgerstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	err = store.Commit(ctx, "s1", kernel.Step{
		Messages: []kernel.Message{{Seq: 1, Role: kernel.RoleUser, Content: "hi", Time: at}},
		Meta:     kernel.SessionMeta{Title: "hi", Status: kernel.StatusIdle, Created: at, Updated: at},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Export(ctx, "s1", os.Stdout); err != nil {
		log.Fatal(err)
	}
	// Output:
	// {"type":"session","version":1,"meta":{"id":"s1","title":"hi","model":"","status":"idle","created":"2026-11-22T12:00:00Z","updated":"2026-11-22T12:00:00Z","last_seq":1,"runs":0,"turns":0,"usage":{"input_tokens":0,"output_tokens":0},"cost_usd":0}}
	// {"type":"message","seq":1,"role":"user","content":"hi","time":"2026-11-22T12:00:00Z"}
}
