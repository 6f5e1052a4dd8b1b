// Command linkcheck reports broken relative links in Markdown files.
package main

import (
	"fmt"
	"os"

	"example.com/linkcheck/internal/check"
)

func main() {
	dir := "."
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	broken, err := check.Dir(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "linkcheck:", err)
		os.Exit(2)
	}
	for _, b := range broken {
		fmt.Printf("%s:%d: broken link to %s\n", b.File, b.Line, b.Target)
	}
	if len(broken) > 0 {
		os.Exit(1)
	}
}
