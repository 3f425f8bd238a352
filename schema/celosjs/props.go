package celosjs

import (
	"fmt"
	"strings"
	"time"
)

// probeTime is the slot time whose fields are looked for in a property
// function's output: every field has different digits, none of them 00,
// so "2037/11/23/19" can only be ${year}/${month}/${day}/${hour}.
var probeTime = time.Date(2037, 11, 23, 19, 47, 58, 0, time.UTC)

// SampleTimes are the slot times at which property functions are
// evaluated, converted and checked: the probe time, then times with zero
// fields, a leap day, year and month ends.
var SampleTimes = []time.Time{
	probeTime,
	time.Date(2015, 9, 12, 20, 0, 0, 0, time.UTC),
	time.Date(2024, 2, 29, 23, 59, 59, 0, time.UTC),
	time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC),
	time.Date(1999, 12, 31, 5, 6, 7, 0, time.UTC),
	time.Date(2026, 7, 4, 12, 30, 0, 0, time.UTC),
}

// tokens are the slot-time tokens celos substitutes, with their values.
func tokens(t time.Time) [6][2]string {
	return [6][2]string{
		{"${year}", fmt.Sprintf("%04d", t.Year())},
		{"${month}", fmt.Sprintf("%02d", int(t.Month()))},
		{"${day}", fmt.Sprintf("%02d", t.Day())},
		{"${hour}", fmt.Sprintf("%02d", t.Hour())},
		{"${minute}", fmt.Sprintf("%02d", t.Minute())},
		{"${second}", fmt.Sprintf("%02d", t.Second())},
	}
}

// Substitute replaces the slot-time tokens ${year} ${month} ${day} ${hour}
// ${minute} ${second} (and Celos's undocumented ${millisecond}) in s with
// t's zero-padded UTC fields, as the celos scheduler does in paths and
// properties (scheduler/external.Expand, which schema may not import).
func Substitute(s string, t time.Time) string {
	if !strings.Contains(s, "${") {
		return s
	}
	t = t.UTC()
	for _, kv := range tokens(t) {
		s = strings.ReplaceAll(s, kv[0], kv[1])
	}
	return strings.ReplaceAll(s, "${millisecond}", t.Format(".000")[1:])
}

// tokenize replaces t's field values in s by their tokens, year first.
func tokenize(s string, t time.Time) string {
	for _, kv := range tokens(t) {
		s = strings.ReplaceAll(s, kv[1], kv[0])
	}
	return s
}

// convertPropsFunc samples w's property function and keeps, as static
// properties with slot-time tokens, every property whose values at all
// sample times are the tokens' values; the others go to Props.TODO.
func convertPropsFunc(w *Workflow) error {
	p := w.Props
	at := make([]map[string]string, len(SampleTimes))
	for i, t := range SampleTimes {
		props, err := p.call(t)
		if err != nil {
			if e, ok := err.(*Error); ok {
				err = &Error{e.Pos, fmt.Sprintf("the property function of workflow %q fails for slot time %s: %s", w.ID, t.Format(time.RFC3339), e.Msg)}
			}
			p.Err = err
			return nil
		}
		at[i] = props
	}
	keys := map[string]bool{}
	for _, m := range at {
		for k := range m {
			keys[k] = true
		}
	}
	conv := map[string]string{}
	p.TODO = map[string]string{}
	for _, k := range sortedKeys(keys) {
		missing := ""
		for i, m := range at {
			if _, ok := m[k]; !ok {
				missing = SampleTimes[i].Format(time.RFC3339)
				break
			}
		}
		if missing != "" {
			p.TODO[k] = fmt.Sprintf("the property is absent at slot time %s: %s", missing, samples(at, k))
			continue
		}
		matches := func(tmpl string) bool {
			for i, t := range SampleTimes {
				if Substitute(tmpl, t) != Substitute(at[i][k], t) {
					return false
				}
			}
			return true
		}
		switch raw, tok := at[0][k], tokenize(at[0][k], probeTime); {
		case matches(raw):
			conv[k] = raw
		case matches(tok):
			conv[k] = tok
		default:
			p.TODO[k] = "its value is not the slot time's fields: " + samples(at, k)
		}
	}
	w.ExternalService.Properties = conv
	return nil
}

// samples shows a property's values at three sample times.
func samples(at []map[string]string, k string) string {
	var b strings.Builder
	for i := 1; i < len(at) && i <= 3; i++ {
		if i > 1 {
			b.WriteString(", ")
		}
		v, ok := at[i][k]
		if !ok {
			fmt.Fprintf(&b, "absent at %s", SampleTimes[i].Format(time.RFC3339))
			continue
		}
		fmt.Fprintf(&b, "%q at %s", v, SampleTimes[i].Format(time.RFC3339))
	}
	return b.String()
}
