package schema

// What the compiler makes explicit in the dataVolume and sinceLast
// triggers: sizes such as "1GB" become bytes, a sinceLast without a
// workflow names its own.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"cuelang.org/go/cue"

	"github.com/celos-go/celos/schema/workflow"
)

// sizePattern is #Size's string form (schema/trigger.cue).
var sizePattern = regexp.MustCompile(`^([0-9]{1,19}(?:\.[0-9]{1,9})?) ?([kKMGTPE]i?)?B$`)

// ParseSize turns a size such as "1GB" (10^9 bytes), "500MiB" (500·2^20
// bytes) or "1.5kB" into bytes, rounded up to a whole byte, as the schema's
// #Size describes it. A size beyond workflow.MaxBytes is an error.
func ParseSize(s string) (int64, error) {
	m := sizePattern.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("size %q is not a number and a unit such as \"1GB\" or \"500MiB\"", s)
	}
	n, ok := new(big.Rat).SetString(m[1])
	if !ok {
		return 0, fmt.Errorf("size %q: bad number", s)
	}
	unit := new(big.Int).SetInt64(1)
	if p := m[2]; p != "" {
		exp := int64(strings.IndexByte("kMGTPE", p[0]) + 1)
		if p[0] == 'K' {
			exp = 1
		}
		if strings.HasSuffix(p, "i") {
			unit.Lsh(unit, uint(10*exp))
		} else {
			unit.Exp(big.NewInt(1000), big.NewInt(exp), nil)
		}
	}
	n.Mul(n, new(big.Rat).SetInt(unit))
	q, r := new(big.Int).QuoRem(n.Num(), n.Denom(), new(big.Int))
	if r.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return 0, fmt.Errorf("size %q is more than %d bytes", s, workflow.MaxBytes)
	}
	return q.Int64(), nil
}

// triggerProblem is a value of a trigger the compiler could not make
// explicit, at path below the workflow.
type triggerProblem struct {
	path []cue.Selector
	msg  string
}

// explicitTriggers rewrites the JSON of workflow id (as CUE exported it)
// so that every dataVolume minBytes is a number of bytes and every
// sinceLast names a workflow. It returns the rewritten JSON, or the input
// when nothing changed.
func explicitTriggers(id string, data []byte) ([]byte, []triggerProblem) {
	if !bytes.Contains(data, []byte(`"dataVolume"`)) && !bytes.Contains(data, []byte(`"sinceLast"`)) {
		return data, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var w map[string]any
	if err := dec.Decode(&w); err != nil {
		return data, nil // the strict decoding after this reports it
	}
	var probs []triggerProblem
	var walk func(t map[string]any, path []cue.Selector, depth int)
	walk = func(t map[string]any, path []cue.Selector, depth int) {
		if depth > workflow.MaxTriggerDepth {
			return
		}
		sub := func(n ...cue.Selector) []cue.Selector { return append(path[:len(path):len(path)], n...) }
		switch t["type"] {
		case workflow.TriggerDataVolume:
			if p, ok := t["path"].(string); ok && p != "" {
				if _, _, err := workflow.GlobDir(p); err != nil {
					probs = append(probs, triggerProblem{sub(cue.Str("path")), err.Error()})
				}
			}
			switch s := t["minBytes"].(type) {
			case string:
				n, err := ParseSize(s)
				if err != nil {
					probs = append(probs, triggerProblem{sub(cue.Str("minBytes")), err.Error()})
					return
				}
				t["minBytes"] = json.Number(strconv.FormatInt(n, 10))
			case json.Number:
				if n, err := s.Int64(); err != nil || n < 0 {
					probs = append(probs, triggerProblem{sub(cue.Str("minBytes")), fmt.Sprintf("minBytes %s must be a number of bytes from 0 to %d, or a size such as \"1GB\"", s, workflow.MaxBytes)})
					return
				}
			}
		case workflow.TriggerSinceLast:
			if _, ok := t["workflow"]; !ok {
				t["workflow"] = id
			}
		}
		if ts, ok := t["triggers"].([]any); ok {
			for i, c := range ts {
				if cm, ok := c.(map[string]any); ok {
					walk(cm, sub(cue.Str("triggers"), cue.Index(i)), depth+1)
				}
			}
		}
		if c, ok := t["trigger"].(map[string]any); ok {
			walk(c, sub(cue.Str("trigger")), depth+1)
		}
	}
	if t, ok := w["trigger"].(map[string]any); ok {
		walk(t, []cue.Selector{cue.Str("trigger")}, 1)
	}
	out, err := json.Marshal(w)
	if err != nil {
		return data, probs
	}
	return out, probs
}

// dotted writes a path as CUE's errors do: trigger.triggers.0.minBytes.
func dotted(path []cue.Selector) string {
	parts := make([]string, len(path))
	for i, s := range path {
		parts[i] = s.String()
	}
	return strings.Join(parts, ".")
}
