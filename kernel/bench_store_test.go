package kernel_test

import (
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

func newBenchStore() kernel.Store { return memory.New() }
