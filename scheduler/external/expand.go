package external

import (
	"strings"
	"time"
)

// Expand substitutes the slot-time variables of TimeVars (${year} ${month}
// ${day} ${hour} ${minute} ${second}, and Celos's undocumented
// ${millisecond}) in s with the values for t. Other ${...} text is left as
// it is.
func Expand(s string, t time.Time) string {
	if !strings.Contains(s, "${") {
		return s
	}
	t = t.UTC()
	return timeReplacer(t).Replace(s)
}

func timeReplacer(t time.Time) *strings.Replacer {
	v := TimeVars(t)
	return strings.NewReplacer(
		"${year}", v["year"],
		"${month}", v["month"],
		"${day}", v["day"],
		"${hour}", v["hour"],
		"${minute}", v["minute"],
		"${second}", v["second"],
		"${millisecond}", t.Format(".000")[1:],
	)
}
