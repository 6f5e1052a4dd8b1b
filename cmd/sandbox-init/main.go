// Command agentkernel-sandbox-init is the sandbox's dedicated launcher: the
// small program the kernel starts as PID 1 of every sandbox instead of
// re-executing its own (large) binary. `make build` puts it next to
// bin/kernel and links its sha256 into the kernel, which uses it only when
// the file there has that hash (see docs/sandbox.md, "The launcher").
// Run by hand it only says what it is.
package main

import (
	"fmt"
	"os"

	"github.com/agentkernel/agentkernel/sandbox"
)

func main() {
	sandbox.Main() // never returns when started by the kernel as a launcher
	fmt.Fprintln(os.Stderr, "agentkernel-sandbox-init: the kernel's sandbox launcher; the kernel starts it, it does nothing on its own")
	os.Exit(2)
}
