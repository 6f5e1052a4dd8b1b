//go:build !unix

package sdk

import "os"

// takeOverStdout is a no-op where there are no Unix file descriptors to
// move; the handshake is only as safe as the tools' discipline.
func takeOverStdout(stderr *os.File, cert string) (*os.File, error) { return os.Stdout, nil }

// fillsHandshakeCert is false: nothing here can put the SDK's certificate
// into go-plugin's handshake line, so go-plugin makes its own.
const fillsHandshakeCert = false

func watchParent() {}
