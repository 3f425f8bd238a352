package schema

// "Did you mean" for a field the schema does not allow.

import (
	"fmt"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
)

// suggestField returns " (did you mean NAME?)" for the field at path that
// CUE refused ("field not allowed"), when one field the enclosing struct
// allows is close to it (maxRetries → maxRetryCount, schedul →
// schedule), else "".
func (c *compiler) suggestField(path []string) string {
	if c.root == nil || len(path) < 2 {
		return ""
	}
	if path[0] == "#Project" {
		path = path[1:]
	}
	bad := path[len(path)-1]
	if unq, err := strconv.Unquote(bad); err == nil {
		bad = unq
	}
	parent := *c.root
	if len(path) > 1 {
		parent = c.root.LookupPath(errorPath(path[:len(path)-1]))
	}
	it, err := parent.Fields(cue.Optional(true))
	if err != nil {
		return ""
	}
	var names []string
	for it.Next() {
		// The parent may be a list (its elements' selectors are indexes)
		// or have definitions: only field names are suggested.
		sel := it.Selector()
		if !sel.IsString() {
			continue
		}
		if name := sel.Unquoted(); name != bad {
			names = append(names, name)
		}
	}
	if best := closest(bad, names); best != "" {
		return fmt.Sprintf(" (did you mean %s?)", best)
	}
	return ""
}

// closest is the name nearest to s, if one is near enough: a small edit
// distance for its length, or a long common prefix (a word of the name
// written another way).
func closest(s string, names []string) string {
	best, bestScore := "", 0
	ls := strings.ToLower(s)
	for _, n := range names {
		ln := strings.ToLower(n)
		d := editDistance(ls, ln)
		score := 0
		switch {
		case d <= max(1, min(len(s), len(n))/3):
			score = 100 - d
		case commonPrefix(ls, ln) >= 5 && commonPrefix(ls, ln)*2 >= min(len(s), len(n)):
			score = commonPrefix(ls, ln)
		}
		if score > bestScore {
			best, bestScore = n, score
		}
	}
	return best
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// editDistance is the Levenshtein distance of a and b (bytes; field names
// are short).
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return max(len(a), len(b))
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
