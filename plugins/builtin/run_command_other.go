//go:build !unix

package builtin

// oNonblock is not needed where there are no FIFOs to open.
const oNonblock = 0
