package builtin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/builtin"
)

func ExampleNew() {
	dir, err := os.MkdirTemp("", "workspace")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello\nold world\n"), 0o644); err != nil {
		log.Fatal(err)
	}

	tools, closer, err := builtin.New(builtin.Config{Root: dir, Enable: []string{"read_file", "edit_file"}})
	if err != nil {
		log.Fatal(err)
	}
	defer closer.Close()
	reg := kernel.NewRegistry()
	if err := reg.Register(tools...); err != nil {
		log.Fatal(err)
	}

	call := func(name, args string) {
		if _, err := reg.Validate(name, json.RawMessage(args)); err != nil {
			fmt.Println("rejected:", err)
			return
		}
		t, _ := reg.Lookup(name)
		res, err := t.Call(context.Background(), json.RawMessage(args))
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Println(res.Content)
	}
	call("edit_file", `{"path":"hello.txt","old":"old world","new":"brave new world"}`)
	call("read_file", `{"path":"hello.txt"}`)
	call("read_file", `{"path":"../etc/passwd"}`)
	call("read_file", `{"path":"hello.txt","offset":0}`)
	// Output:
	// edited hello.txt: replaced 1 line at line 2 with 1 line; the file is now 22 bytes (was 16)
	//      1	hello
	//      2	brave new world
	//
	// error: path "../etc/passwd" escapes the workspace: ".." climbs above the workspace root
	// rejected: invalid arguments: /offset: must be >= 1 but found 0
}
