package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/kernel/queue"
	"github.com/agentkernel/agentkernel/kernel/replica"
)

const steerUsage = `Usage: kernel steer SESSION "TEXT"      queue TEXT for a running session (next step boundary)
       kernel steer --follow-up SESSION "TEXT"   run TEXT as a new prompt after the current run
       kernel steer --list SESSION              show what is queued
       kernel steer --cancel ID SESSION         cancel a queued message before it is delivered

The message goes through the queue directory beside the session store (the
database, with the postgres store), so it works while another kernel process
runs the session, or another kernel serve replica. Flags: --config FILE, --store DIR`

// steerQueue opens the queue kernel steer writes to: the database's on a
// postgres store, else the directory beside the Badger store.
func steerQueue(cfg *Config, env *cliEnv) (replica.Queue, func(), error) {
	sc, err := cfg.storeConfig()
	if err != nil {
		return nil, nil, err
	}
	if sc.Kind == "postgres" {
		a := &app{cfg: cfg, log: newLogger(env.stderr)}
		if err := a.openStore(false); err != nil {
			return nil, nil, err
		}
		q, err := a.openQueue()
		if err != nil {
			a.Close()
			return nil, nil, err
		}
		return q, func() { a.Close() }, nil
	}
	dir, temp, err := cfg.queueDir()
	if err != nil {
		return nil, nil, err
	}
	if temp {
		return nil, nil, exitError{code: 2, msg: "steer needs the badger or postgres store: a memory store lives only in the process that runs the session"}
	}
	q, err := queue.Open(dir, func(msg string) { fmt.Fprintf(env.stderr, "kernel steer: warning: %s\n", msg) })
	if err != nil {
		return nil, nil, err
	}
	return q, func() {}, nil
}

// cmdSteer queues, lists or cancels messages for a session.
func cmdSteer(ctx context.Context, args []string, env *cliEnv) error {
	fs := newFlagSet("steer", "", env.stderr)
	var cf commonFlags
	cf.register(fs)
	follow := fs.Bool("follow-up", false, "queue a prompt to run after the current run ends")
	list := fs.Bool("list", false, "list the session's queued messages")
	cancel := fs.String("cancel", "", "cancel the queued message `ID`")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		fmt.Fprintln(env.stderr, steerUsage)
		return exitError{code: 2, msg: "steer needs a session id"}
	}
	cfg, err := cf.load()
	if err != nil {
		return err
	}
	q, closeQ, err := steerQueue(cfg, env)
	if err != nil {
		return err
	}
	defer closeQ()
	sid := pos[0]
	if !*list && *cancel == "" {
		// A typo'd id would wait forever: check the session exists (a
		// read-only snapshot works while a kernel holds the store).
		a := &app{cfg: cfg, log: newLogger(env.stderr)}
		if err := a.openStore(true); err != nil {
			return err
		}
		_, err := a.store.Load(ctx, sid)
		a.Close()
		if err != nil {
			return err
		}
	}
	switch {
	case *list:
		es, err := q.List(ctx, sid)
		if err != nil {
			return err
		}
		if len(es) == 0 {
			fmt.Fprintln(env.stderr, "nothing queued for "+sid)
		}
		for _, e := range es {
			fmt.Fprintf(env.stdout, "%s\t%s\t%s\t%s\n", e.ID, e.Kind, e.Time.Local().Format(time.TimeOnly), clip(e.Text, 70))
		}
		return nil
	case *cancel != "":
		if err := q.Cancel(ctx, sid, *cancel); err != nil {
			return err
		}
		fmt.Fprintln(env.stdout, "cancelled", *cancel)
		return nil
	}
	if len(pos) < 2 {
		return exitError{code: 2, msg: "steer needs the text of the message"}
	}
	kind := queue.Steer
	if *follow {
		kind = queue.FollowUp
	}
	e, err := q.Add(ctx, sid, strings.Join(pos[1:], " "), kind)
	if err != nil {
		return err
	}
	fmt.Fprintln(env.stdout, e.ID)
	return nil
}
