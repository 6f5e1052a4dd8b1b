// Command version prints wasmtest.SeenWazeroVersion, for
// TestSeenWazeroVersionFollowsTheLink.
package main

import (
	"fmt"

	"github.com/agentkernel/agentkernel/plugins/wasm/wasmtest"
)

func main() { fmt.Println(wasmtest.SeenWazeroVersion()) }
