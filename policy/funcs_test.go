package policy

import "testing"

func TestFormatUSD(t *testing.T) {
	for in, want := range map[float64]string{
		0.0006493499999999999: "$0.000649",
		0.0012:                "$0.0012",
		0.35:                  "$0.35",
		0.5:                   "$0.50",
		12.5:                  "$12.50",
		0:                     "$0.00",
	} {
		if got := formatUSD(in); got != want {
			t.Errorf("formatUSD(%v) = %q, want %q", in, got, want)
		}
	}
}
