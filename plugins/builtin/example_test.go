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
	"github.com/agentkernel/agentkernel/tool"
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

// A call waiting for approval is shown with what the tool itself says it
// would do: the diff of the file as `diff -u` prints it, or the error the
// call would fail with.
func ExampleEditFile_Preview() {
	dir, err := os.MkdirTemp("", "workspace")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello\nold world\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	tools, closer, err := builtin.New(builtin.Config{Root: dir, Enable: []string{"edit_file"}})
	if err != nil {
		log.Fatal(err)
	}
	defer closer.Close()
	for _, args := range []string{
		`{"path":"hello.txt","old":"old world","new":"brave new world"}`,
		`{"path":"hello.txt","old":"o","new":"0"}`,
	} {
		pv, err := tool.PreviewOf(context.Background(), tools[0], json.RawMessage(args))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(pv.Summary)
		for _, f := range pv.Files {
			fmt.Print(f.Diff)
		}
	}
	// Output:
	// edit hello.txt: replace 1 line at line 2 with 1 line
	// --- a/hello.txt
	// +++ b/hello.txt
	// @@ -1,2 +1,2 @@
	//  hello
	// -old world
	// +brave new world
	// edit "hello.txt": old text occurs 3 times (at lines 1, 2, 2); nothing was changed. Include more surrounding lines in old so that it matches exactly once
}
