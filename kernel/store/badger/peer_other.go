//go:build !linux

package badger

import "net"

// samePeer trusts the file system here: the socket is 0600 in a 0700
// directory.
func samePeer(c net.Conn) bool { return true }
