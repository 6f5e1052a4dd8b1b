package kernel_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// clockPolicy allows every call and records the State's clock its
// before_model budget checks and its decisions saw.
type clockPolicy struct {
	checked, decided []time.Time
}

func (p *clockPolicy) Surface(_ context.Context, _ *kernel.State, tools []kernel.ToolSpec) []kernel.ToolSpec {
	return tools
}

func (p *clockPolicy) Decide(_ context.Context, st *kernel.State, _ *kernel.Call) kernel.Decision {
	p.decided = append(p.decided, st.Now)
	return kernel.Decision{Effect: kernel.EffectAllow}
}

func (p *clockPolicy) Budget(_ context.Context, st *kernel.State, phase kernel.BudgetPhase) kernel.BudgetVerdict {
	if phase == kernel.BeforeModel {
		p.checked = append(p.checked, st.Now)
	}
	return kernel.BudgetVerdict{}
}

// TestTurnStartsAtItsBudgetCheck: with the real clock, a turn starts at
// the reading its before_model budget check took (one clock reading, not
// two a moment apart), so what the policy sees during the turn is that
// reading; with a configured clock every turn still reads it.
func TestTurnStartsAtItsBudgetCheck(t *testing.T) {
	ctx := context.Background()
	newKernel := func(pol kernel.Policy, now func() time.Time) *kernel.Kernel {
		reg := kernel.NewRegistry()
		if err := reg.Register(kernel.NewTool(kernel.ToolSpec{Name: "read_file", Tier: kernel.TierReadOnly}, handTool)); err != nil {
			t.Fatal(err)
		}
		k, err := kernel.New(kernel.Config{Provider: &benchProvider{turns: 3, calls: 1}, Store: memory.New(), Tools: reg, Model: "m", MaxTurns: 16, Policy: pol, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	t.Run("real clock", func(t *testing.T) {
		pol := &clockPolicy{}
		if res, err := newKernel(pol, nil).Run(ctx, "", "go"); err != nil || res.StopReason != kernel.StopCompleted {
			t.Fatal(res, err)
		}
		if len(pol.checked) != 3 || len(pol.decided) != 2 {
			t.Fatalf("%d checks, %d decisions; want 3, 2", len(pol.checked), len(pol.decided))
		}
		for i, d := range pol.decided {
			if !d.Equal(pol.checked[i]) || d.Compare(pol.checked[i]) != 0 {
				t.Fatalf("turn %d: the call saw the turn start %v, its budget check read %v", i+1, d, pol.checked[i])
			}
		}
	})
	t.Run("configured clock", func(t *testing.T) {
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		reads := 0
		pol := &clockPolicy{}
		k := newKernel(pol, func() time.Time { reads++; return base.Add(time.Duration(reads) * time.Second) })
		if res, err := k.Run(ctx, "", "go"); err != nil || res.StopReason != kernel.StopCompleted {
			t.Fatal(res, err)
		}
		for i, d := range pol.decided {
			if !d.After(pol.checked[i]) {
				t.Fatalf("turn %d: the turn started at %v, not after its budget check's reading %v (the configured clock was not read for it)", i+1, d, pol.checked[i])
			}
		}
	})
}
