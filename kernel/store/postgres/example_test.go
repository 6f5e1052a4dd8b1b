package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/postgres"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
)

// Two processes share a session: the one holding its lease writes, with
// the lease's token on every step; the other is refused until the lease
// is released, and then gets a larger token. (The example takes a new
// database on the test binary's throwaway server; a real deployment
// points Open at its database.)
func Example() {
	srv, err := pgtest.SharedServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	name, _ := srv.CreateDatabase()
	defer srv.DropDatabase(name)
	dsn := srv.DSN(name)
	if _, err := postgres.Migrate(ctx, dsn, postgres.Options{}); err != nil {
		fmt.Println(err)
		return
	}
	a, _ := postgres.Open(ctx, dsn, postgres.Options{})
	defer a.Close()
	b, _ := postgres.Open(ctx, dsn, postgres.Options{})
	defer b.Close()

	a.Commit(ctx, "s1", kernel.Step{Meta: kernel.SessionMeta{Title: "shared", Status: kernel.StatusIdle, Updated: time.Now()}})
	la, _ := a.AcquireLease(ctx, "s1", "replica-a", time.Minute)
	err = a.Commit(ctx, "s1", kernel.Step{Messages: []kernel.Message{{Seq: 1, Role: kernel.RoleUser, Content: "hello"}}, Fence: la.Token})
	fmt.Println("a writes with its token:", err)
	_, err = b.AcquireLease(ctx, "s1", "replica-b", time.Minute)
	fmt.Println("b asks for the lease:", errors.Is(err, kernel.ErrLeaseHeld))
	a.ReleaseLease(ctx, la)
	lb, _ := b.AcquireLease(ctx, "s1", "replica-b", time.Minute)
	fmt.Println("b's token is larger:", lb.Token > la.Token)
	err = a.Commit(ctx, "s1", kernel.Step{Messages: []kernel.Message{{Seq: 2, Role: kernel.RoleUser, Content: "late"}}, Fence: la.Token})
	fmt.Println("a's late write:", errors.Is(err, kernel.ErrLeaseLost))
	se, _ := b.Load(ctx, "s1")
	fmt.Println(len(se.Messages), se.Messages[0].Content)
	// Output:
	// a writes with its token: <nil>
	// b asks for the lease: true
	// b's token is larger: true
	// a's late write: true
	// 1 hello
}
