package compare

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/celos-go/celos/schema/workflow/testcase"
)

// Bounds on a report: a diff longer than MaxDiffLines lines is cut, and
// files larger than MaxDiffBytes are compared by size and first
// difference only; Plain reports MaxListedPaths paths, a diff line is
// cut after MaxLineBytes.
const (
	MaxDiffLines = 200
	MaxDiffBytes = 1 << 20
	// MaxListedPaths bounds how many differing paths Plain reports in
	// full; the rest are counted.
	MaxListedPaths = 20
	// MaxLineBytes bounds one line of a diff; a longer one is cut and
	// its length said.
	MaxLineBytes = 400
)

// Compare compares expected with actual by c and returns the differences,
// one paragraph each, or nil when they are equal. An error means the
// trees could not be compared (a record comparer given a file that is
// not JSON or TSV).
func Compare(c testcase.Comparer, expected, actual Tree) ([]string, error) {
	switch c.Type {
	case testcase.ComparePlain, "":
		return Plain(expected, actual), nil
	case testcase.CompareNDJSON:
		return NDJSON(expected, actual, c.Ignore)
	case testcase.CompareTSV:
		return TSV(expected, actual, c.OrderedRows, c.OrderedColumns)
	}
	return nil, fmt.Errorf("unknown comparer %q", c.Type)
}

// Plain compares two trees file by file: paths only in one of them, a
// file on one side and a directory on the other, and files whose bytes
// differ (a unified diff for text files, sizes and the first differing
// byte otherwise). The first MaxListedPaths differing paths are reported
// in full, then how many more differ.
func Plain(expected, actual Tree) []string {
	var diffs []string
	more := 0
	for _, p := range union(expected, actual) {
		e, inE := expected[p]
		a, inA := actual[p]
		if len(diffs) == MaxListedPaths {
			if !inA || !inE || e.Dir != a.Dir || (!e.Dir && !bytes.Equal(e.Data, a.Data)) {
				more++
			}
			continue
		}
		switch {
		case !inA:
			diffs = append(diffs, fmt.Sprintf("%s: expected %s, missing from the output", show(p), kind(e)))
		case !inE:
			diffs = append(diffs, fmt.Sprintf("%s: unexpected %s in the output", show(p), kind(a)))
		case e.Dir != a.Dir:
			diffs = append(diffs, fmt.Sprintf("%s: expected %s, the output has %s", show(p), kind(e), kind(a)))
		case !e.Dir && !bytes.Equal(e.Data, a.Data):
			diffs = append(diffs, fmt.Sprintf("%s: contents differ\n%s", show(p), fileDiff(p, e.Data, a.Data)))
		}
	}
	if more > 0 {
		diffs = append(diffs, fmt.Sprintf("… and %d more paths differ", more))
	}
	return diffs
}

func union(a, b Tree) []string {
	all := Tree{}
	for p, e := range a {
		all[p] = e
	}
	for p, e := range b {
		all[p] = e
	}
	return all.Paths()
}

func show(p string) string {
	if p == "." {
		return "(the output file)"
	}
	return p
}

func kind(e Entry) string {
	if e.Dir {
		return "a directory"
	}
	return fmt.Sprintf("a file (%d bytes)", len(e.Data))
}

// isText reports whether data reads as text: UTF-8 without NUL bytes.
func isText(data []byte) bool {
	return utf8.Valid(data) && bytes.IndexByte(data, 0) < 0
}

// fileDiff describes how two versions of a file differ.
func fileDiff(p string, want, got []byte) string {
	if !isText(want) || !isText(got) || len(want) > MaxDiffBytes || len(got) > MaxDiffBytes {
		i := 0
		for i < len(want) && i < len(got) && want[i] == got[i] {
			i++
		}
		return fmt.Sprintf("    expected %d bytes, got %d; they differ from byte %d on", len(want), len(got), i)
	}
	return UnifiedDiff("expected/"+p, "actual/"+p, splitLines(string(want)), splitLines(string(got)))
}

// cutLine cuts a line of a report longer than MaxLineBytes on a rune
// boundary and says its length.
func cutLine(l string) string {
	if len(l) <= MaxLineBytes {
		return l
	}
	cut := MaxLineBytes
	for cut > 0 && !utf8.RuneStart(l[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", l[:cut], len(l))
}

// splitLines splits text into lines, each with its newline, and marks a
// last line without one.
func splitLines(s string) []string {
	lines := difflib.SplitLines(s)
	// SplitLines appends "\n" to the last line: tell a missing final
	// newline apart from a present one.
	if n := len(lines); n > 0 {
		if strings.HasSuffix(s, "\n") || s == "" {
			lines = lines[:n-1]
		} else {
			lines[n-1] = strings.TrimSuffix(lines[n-1], "\n") + "\n\\ No newline at end of file\n"
		}
	}
	return lines
}

// UnifiedDiff is a unified diff of two texts split into lines (with
// their newlines), indented by four spaces and cut after MaxDiffLines
// lines.
func UnifiedDiff(from, to string, a, b []string) string {
	text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: a, B: b, FromFile: from, ToFile: to, Context: 3})
	if err != nil {
		return "    (no diff: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	more := 0
	if len(lines) > MaxDiffLines {
		more = len(lines) - MaxDiffLines
		lines = lines[:MaxDiffLines]
	}
	var sb strings.Builder
	for i, l := range lines {
		if i > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString("    " + cutLine(l))
	}
	if more > 0 {
		fmt.Fprintf(&sb, "\n    … %d more lines", more)
	}
	return sb.String()
}
