package compare

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/schema/workflow/testcase"
)

func TestPlain(t *testing.T) {
	base := Files(map[string]string{"a/part-0": "one\ntwo\nthree\n", "b": "x"})
	tests := []struct {
		name   string
		actual Tree
		want   []string
	}{
		{"equal", Files(map[string]string{"a/part-0": "one\ntwo\nthree\n", "b": "x"}), nil},
		{"missing and extra", Files(map[string]string{"a/part-0": "one\ntwo\nthree\n", "c": ""}), []string{
			"b: expected a file (1 bytes), missing from the output",
			"c: unexpected a file (0 bytes) in the output",
		}},
		{"type", Tree{"a": {Dir: true}, "a/part-0": {Data: []byte("one\ntwo\nthree\n")}, "b": {Dir: true}}, []string{
			"b: expected a file (1 bytes), the output has a directory",
		}},
		{"text diff", Files(map[string]string{"a/part-0": "one\nTWO\nthree\n", "b": "x"}), []string{
			"a/part-0: contents differ\n" +
				"    --- expected/a/part-0\n" +
				"    +++ actual/a/part-0\n" +
				"    @@ -1,3 +1,3 @@\n" +
				"     one\n" +
				"    -two\n" +
				"    +TWO\n" +
				"     three",
		}},
		{"missing newline", Files(map[string]string{"a/part-0": "one\ntwo\nthree", "b": "x"}), []string{
			"a/part-0: contents differ\n" +
				"    --- expected/a/part-0\n" +
				"    +++ actual/a/part-0\n" +
				"    @@ -1,3 +1,3 @@\n" +
				"     one\n" +
				"     two\n" +
				"    -three\n" +
				"    +three\n" +
				"    \\ No newline at end of file",
		}},
		{"binary", Files(map[string]string{"a/part-0": "one\ntwo\nthree\n", "b": "\x00y"}), []string{
			"b: contents differ\n    expected 1 bytes, got 2; they differ from byte 0 on",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Plain(base, tt.actual)); diff != "" {
				t.Errorf("Plain (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNDJSON(t *testing.T) {
	want := Files(map[string]string{"part-0": `{"a":1,"t":"x","m":{"k":1,"at":5}}` + "\n" + `{"a":2}` + "\n" + `{"a":2}` + "\n"})
	tests := []struct {
		name   string
		actual Tree
		ignore []string
		want   []string
	}{
		{"other order, other files, ignored fields, hidden files", Files(map[string]string{
			"part-1":   `{"a":2}` + "\n\n" + `{"m":{"at":9,"k":1},"t":"y","a":1}`,
			"part-2":   `{"a":2}`,
			"_SUCCESS": "",
		}), []string{"t", "m.at"}, nil},
		{"counts matter", Files(map[string]string{"p": `{"a":2}` + "\n" + `{"a":1,"t":"x","m":{"k":1,"at":5}}` + "\n" + `{"a":3}` + "\n" + `{"a":3}`}), nil, []string{
			"1 expected record(s) missing from the output:\n    {\"a\":2}",
			"2 unexpected record(s) in the output:\n    {\"a\":3}  (×2)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NDJSON(want, tt.actual, tt.ignore)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("NDJSON (-want +got):\n%s", diff)
			}
		})
	}
	for name, tc := range map[string]struct {
		actual Tree
		err    string
	}{
		"not JSON": {Files(map[string]string{"p": "{\"a\":1}\n{oops"}), "actual p:2: not a JSON value"},
		"not flat": {Files(map[string]string{"d/p": "{}"}), "the actual output is not flat: d is a directory"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NDJSON(want, tc.actual, nil)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

func TestTSV(t *testing.T) {
	want := Files(map[string]string{"t.tsv": "word\tcount\na\t1\nb\t2\n"})
	swapped := Files(map[string]string{"t.tsv": "count\tword\n2\tb\n1\ta\n"})
	reordered := Files(map[string]string{"t.tsv": "word\tcount\nb\t2\na\t1\n"})
	tests := []struct {
		name       string
		actual     Tree
		rows, cols bool
		want       []string
	}{
		{"unordered", swapped, false, false, nil},
		{"ordered columns", swapped, false, true, []string{"columns differ: expected word, count; got count, word"}},
		{"ordered rows", reordered, true, false, []string{"rows differ (in order; columns word, count):\n" +
			"    --- expected\n    +++ actual\n    @@ -1,2 +1,2 @@\n    +b\t2\n     a\t1\n    -b\t2"}},
		{"ordered rows, swapped columns", Files(map[string]string{"t.tsv": "count\tword\n1\ta\n2\tb\n"}), true, false, nil},
		{"missing row", Files(map[string]string{"t.tsv": "word\tcount\na\t1\n"}), false, false, []string{"1 expected row(s) missing from the output:\n    b\t2"}},
		{"other columns", Files(map[string]string{"t.tsv": "word\tn\na\t1\nb\t2\n"}), false, false, []string{"columns differ: expected word, count; got word, n (in any order)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := TSV(want, tt.actual, tt.rows, tt.cols)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("TSV (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := TSV(want, Files(map[string]string{"t.tsv": "word\tcount\na\n"}), false, false); err == nil || !strings.Contains(err.Error(), "actual t.tsv:2: 1 fields, the header has 2") {
		t.Errorf("ragged row: %v", err)
	}
}

func TestCompareDispatch(t *testing.T) {
	a, b := Files(map[string]string{"x": "1"}), Files(map[string]string{"x": "2"})
	for _, c := range []testcase.Comparer{{Type: "plain"}, {Type: "ndjson"}} {
		got, err := Compare(c, a, b)
		if err != nil || len(got) == 0 {
			t.Errorf("%s: %v %v, want a difference", c.Type, got, err)
		}
	}
	if _, err := Compare(testcase.Comparer{Type: "xml"}, a, b); err == nil {
		t.Error("an unknown comparer compared")
	}
}

func TestReadLocal(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "d", "e"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "d", "f"), []byte("hi"), 0o644))
	got, err := ReadLocal(dir)
	must(err)
	want := Tree{"d": {Dir: true}, "d/e": {Dir: true}, "d/f": {Data: []byte("hi")}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tree (-want +got):\n%s", diff)
	}
	one, err := ReadLocal(filepath.Join(dir, "d", "f"))
	must(err)
	if diff := cmp.Diff(Tree{".": {Data: []byte("hi")}}, one); diff != "" {
		t.Errorf("file root (-want +got):\n%s", diff)
	}
	if _, err := ReadLocal(filepath.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) || !IsNotExist(err) {
		t.Errorf("missing root: %v", err)
	}
	must(os.Symlink("/etc/passwd", filepath.Join(dir, "d", "link")))
	if _, err := ReadLocal(dir); err == nil || !strings.Contains(err.Error(), "link: neither a regular file nor a directory (a symbolic link)") {
		t.Errorf("symbolic link: %v", err)
	}
	must(os.Remove(filepath.Join(dir, "d", "link")))
	must(syscallMkfifo(filepath.Join(dir, "d", "fifo")))
	if _, err := ReadLocal(dir); err == nil {
		t.Error("a FIFO was read")
	}
}

// TestPlainIsBounded: an output that differs everywhere is reported in a
// bounded, readable size: the first MaxListedPaths paths in full, then
// how many more; a long line is cut. 5,000 differing files printed
// 30,000 lines, and one line of 1 MiB was printed whole (twice).
func TestPlainIsBounded(t *testing.T) {
	want, got := map[string]string{}, map[string]string{}
	for i := range 5000 {
		name := fmt.Sprintf("d/part-%05d", i)
		want[name], got[name] = fmt.Sprintf("a %d\n", i), fmt.Sprintf("b %d\n", i)
	}
	diffs := Plain(Files(want), Files(got))
	if len(diffs) != MaxListedPaths+1 {
		t.Fatalf("%d differences reported, want %d and a summary", len(diffs), MaxListedPaths)
	}
	if last := diffs[len(diffs)-1]; last != fmt.Sprintf("… and %d more paths differ", 5000-MaxListedPaths) {
		t.Errorf("summary: %q", last)
	}
	long := strings.Repeat("x", 1<<20-10)
	diffs = Plain(Files(map[string]string{"f": long + "\n"}), Files(map[string]string{"f": long + "y\n"}))
	if n := len(strings.Join(diffs, "\n")); len(diffs) != 1 || n > 4*MaxLineBytes {
		t.Fatalf("a differing line of 1 MiB: %d differences, %d bytes", len(diffs), n)
	}
	if !strings.Contains(diffs[0], "… (1048568 bytes)") {
		t.Errorf("the cut line does not say its length:\n%.300s", diffs[0])
	}
}

// TestRecordsAreCut: a record of a line-delimited JSON or TSV comparison
// listed as missing or unexpected is cut at MaxLineBytes, as a diff line
// is; a record of 1 MiB was listed whole.
func TestRecordsAreCut(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	diffs, err := NDJSON(Files(map[string]string{"p": `{"a":"` + long + `"}`}), Files(map[string]string{"p": `{"a":"y"}`}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Join(diffs, "\n")); n > 4*MaxLineBytes {
		t.Errorf("NDJSON: %d bytes reported:\n%.300s", n, strings.Join(diffs, "\n"))
	}
	diffs, err = TSV(Files(map[string]string{"p": "h\n" + long + "\n"}), Files(map[string]string{"p": "h\ny\n"}), false, false)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Join(diffs, "\n")); n > 4*MaxLineBytes {
		t.Errorf("TSV: %d bytes reported:\n%.300s", n, strings.Join(diffs, "\n"))
	}
}
