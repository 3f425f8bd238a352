package deploy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestIsText(t *testing.T) {
	for _, tc := range []struct {
		data string
		want bool
	}{
		{"<workflow-app/>\n", true},
		{"a\tb\r\n\f", true},
		{"héllo ✓\n", true},
		{"", true},
		{"jar\x00v1", false},
		{"\x1b[31mred\x1b[0m\n", false}, // an escape sequence is not printed to a terminal
		{"del\x7f", false},
		{"\xff\xfe", false},
	} {
		if got := isText([]byte(tc.data)); got != tc.want {
			t.Errorf("isText(%q) = %v, want %v", tc.data, got, tc.want)
		}
	}
}

func TestSplitLines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"a\nb\n", []string{"a\n", "b\n"}},
		{"a\nb", []string{"a\n", "b\n"}},
		{"", []string{}},
	} {
		if d := cmp.Diff(tc.want, splitLines([]byte(tc.in))); d != "" {
			t.Errorf("splitLines(%q) (-want +got):\n%s", tc.in, d)
		}
	}
}

func TestWriteDiffBounded(t *testing.T) {
	diff := "--- a\n+++ b\n@@ -1,3 +1,3 @@\n-x\n+y\n z\n"
	var b strings.Builder
	writeDiff(&b, diff, 4)
	want := "      --- a\n      +++ b\n      @@ -1,3 +1,3 @@\n      -x\n      ... 2 more line(s) of diff; --diff shows all\n"
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("bounded (-want +got):\n%s", d)
	}
	b.Reset()
	writeDiff(&b, diff, -1)
	if strings.Contains(b.String(), "more line") || strings.Count(b.String(), "\n") != 6 {
		t.Errorf("all:\n%s", b.String())
	}
}

// TestPlanFieldPathQuoted: a key with a control character (a property
// named "k\nNo changes: ...") is quoted in the plan's field path, so it
// cannot forge a line of the plan or send an escape sequence to the
// terminal; plain keys, dots included, are written as they are.
func TestPlanFieldPathQuoted(t *testing.T) {
	var got []FieldChange
	diffValue("", map[string]any{"properties": map[string]any{}},
		map[string]any{"properties": map[string]any{"k\nNo changes: x\x1b[31m": "v", "oozie.wf.application.path": "/a", "with space": "s"}}, &got)
	want := []FieldChange{
		{Path: `properties."k\nNo changes: x\x1b[31m"`, New: `"v"`},
		{Path: "properties.oozie.wf.application.path", New: `"/a"`},
		{Path: `properties."with space"`, New: `"s"`},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
