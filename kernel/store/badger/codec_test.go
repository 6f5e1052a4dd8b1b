package badger

import (
	"errors"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
)

func TestCorruptErrorText(t *testing.T) {
	err := error(&kernel.CorruptError{Session: "s1", Part: "message", Seq: 17, Err: errChecksum})
	if got, want := err.Error(), "session s1: message 17: corrupt session data: "+errChecksum.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, kernel.ErrCorrupt) || !errors.Is(err, errChecksum) {
		t.Errorf("errors.Is(%v, kernel.ErrCorrupt / cause) is false", err)
	}
}
