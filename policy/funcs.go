package policy

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/expr-lang/expr"
)

// exprFuncs are the functions the policy language adds to expr's builtins.
var exprFuncs = []expr.Option{
	// usd(x) formats an amount of US dollars for a message: "$0.0006",
	// "$0.35", "$12.50" — not string(x)'s "0.0006493499999999999".
	expr.Function("usd", func(params ...any) (any, error) {
		return formatUSD(toFloat(params[0])), nil
	}, new(func(float64) string), new(func(int) string)),
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int:
		return float64(x)
	}
	return math.NaN()
}

// formatUSD prints dollars with two decimals, or three significant digits
// below a cent.
func formatUSD(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return fmt.Sprintf("$%v", x)
	}
	if a := math.Abs(x); a != 0 && a < 0.01 {
		// three significant digits, trailing zeros dropped: $0.000649, $0.0012
		s := strconv.FormatFloat(x, 'f', 2-int(math.Floor(math.Log10(a))), 64)
		return "$" + strings.TrimRight(s, "0")
	}
	return "$" + strconv.FormatFloat(x, 'f', 2, 64)
}
