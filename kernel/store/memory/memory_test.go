package memory_test

import (
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

func TestConformance(t *testing.T) {
	kerneltest.TestStore(t, func(t *testing.T) kernel.Store { return memory.New() })
}
