package main

import (
	"os"
	"os/user"
)

// cliPrincipal names whoever runs the CLI, for the record of the
// approvals they decide (kernel.ApprovalRecord.By, the approval.resolved
// event): the login name, as kernel serve records an API key's name.
func cliPrincipal() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if n := os.Getenv("USER"); n != "" {
		return n
	}
	return "cli"
}
