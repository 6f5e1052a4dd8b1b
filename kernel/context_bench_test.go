package kernel_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
	"github.com/agentkernel/agentkernel/kernel/tokenizer"
)

// BenchmarkTurnCost runs sessions of growing length (one tool call of 2 KB
// per turn) and reports the cost per turn: with incremental counting it
// stays flat as the history grows. "off" has no context window (no
// accounting), "estimate" counts at 4 bytes a token, "o200k" with the
// tokenizer. The window is large enough that nothing is compacted.
func BenchmarkTurnCost(b *testing.B) {
	tok, _ := tokenizer.Get(tokenizer.O200kBase)
	for _, mode := range []string{"off", "estimate", "o200k"} {
		for _, turns := range []int{50, 200, 800} {
			b.Run(fmt.Sprintf("%s/turns=%d", mode, turns), func(b *testing.B) {
				replies := make([]kerneltest.Reply, 0, turns)
				for i := range turns - 1 {
					replies = append(replies, kerneltest.Calls("read_big", map[string]int{"n": i}))
				}
				replies = append(replies, kerneltest.Text("done"))
				reg := kernel.NewRegistry()
				reg.Register(bigTool(2048))
				cfg := kernel.Config{Store: memory.New(), Tools: reg, Model: "m", MaxTurns: turns}
				switch mode {
				case "estimate":
					cfg.ContextWindow = 1 << 30
				case "o200k":
					cfg.ContextWindow, cfg.Tokenizer = 1<<30, tok
				}
				tok.Count("warm up")
				b.ReportAllocs()
				for b.Loop() {
					cfg.Provider = kerneltest.NewProvider(replies...)
					k, _ := kernel.New(cfg)
					if _, err := k.Run(context.Background(), "", "go"); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*turns), "ns/turn")
			})
		}
	}
}
