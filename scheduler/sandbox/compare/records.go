package compare

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// maxListed bounds how many missing or unexpected records a report lists.
const maxListed = 20

// recordFiles returns the files of a flat tree whose records are compared
// (hidden files such as _SUCCESS left out), sorted; side names the tree.
func recordFiles(t Tree, side, comparer string) ([]string, error) {
	var files []string
	for _, p := range t.Paths() {
		e := t[p]
		if e.Dir {
			return nil, fmt.Errorf("the %s output is not flat: %s is a directory (the %s comparer reads the files of one directory)", side, p, comparer)
		}
		if p == "." || !hidden(p) {
			files = append(files, p)
		}
	}
	return files, nil
}

// NDJSON compares line-delimited JSON: every non-blank line of every file
// of each side is one record, compared as a multiset (order and the file
// a record is in do not matter) after the fields named by ignore
// (dot-separated paths) are removed.
func NDJSON(expected, actual Tree, ignore []string) ([]string, error) {
	var sides [2]map[string]int
	for i, t := range []Tree{expected, actual} {
		side := [2]string{"expected", "actual"}[i]
		files, err := recordFiles(t, side, "ndjson")
		if err != nil {
			return nil, err
		}
		sides[i] = map[string]int{}
		for _, f := range files {
			for n, line := range strings.Split(string(t[f].Data), "\n") {
				if strings.TrimSpace(line) == "" {
					continue
				}
				rec, err := canonicalJSON([]byte(line), ignore)
				if err != nil {
					return nil, fmt.Errorf("%s %s:%d: not a JSON value: %v", side, show(f), n+1, err)
				}
				sides[i][rec]++
			}
		}
	}
	return multisetDiff(sides[0], sides[1], "record"), nil
}

// canonicalJSON decodes one JSON value, removes the ignored paths and
// encodes it again with sorted keys.
func canonicalJSON(data []byte, ignore []string) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	if dec.More() {
		return "", fmt.Errorf("more than one value on the line")
	}
	for _, p := range ignore {
		removePath(v, strings.Split(p, "."))
	}
	out, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

func removePath(v any, path []string) {
	m, ok := v.(map[string]any)
	if !ok || len(path) == 0 {
		return
	}
	if len(path) == 1 {
		delete(m, path[0])
		return
	}
	removePath(m[path[0]], path[1:])
}

// multisetDiff lists the records whose counts differ between want and got.
func multisetDiff(want, got map[string]int, what string) []string {
	var missing, extra []string
	nMissing, nExtra := 0, 0
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		w, g := want[k], got[k]
		switch {
		case w > g:
			nMissing += w - g
			missing = append(missing, counted(k, w-g))
		case g > w:
			nExtra += g - w
			extra = append(extra, counted(k, g-w))
		}
	}
	var diffs []string
	if nMissing > 0 {
		diffs = append(diffs, fmt.Sprintf("%d expected %s(s) missing from the output:\n%s", nMissing, what, listed(missing)))
	}
	if nExtra > 0 {
		diffs = append(diffs, fmt.Sprintf("%d unexpected %s(s) in the output:\n%s", nExtra, what, listed(extra)))
	}
	return diffs
}

func counted(rec string, n int) string {
	if n == 1 {
		return rec
	}
	return fmt.Sprintf("%s  (×%d)", rec, n)
}

func listed(recs []string) string {
	var sb strings.Builder
	for i, r := range recs {
		if i == maxListed {
			fmt.Fprintf(&sb, "\n    … and %d more", len(recs)-maxListed)
			break
		}
		if i > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString("    " + cutLine(r))
	}
	return sb.String()
}

// table is a TSV table: its header and rows.
type table struct {
	header []string
	rows   [][]string
}

// readTable reads the TSV files of a flat tree as one table: each file
// starts with the same header line; every row has as many fields.
func readTable(t Tree, side string) (*table, error) {
	files, err := recordFiles(t, side, "tsv")
	if err != nil {
		return nil, err
	}
	tb := &table{}
	for fi, f := range files {
		lines := strings.Split(strings.TrimSuffix(string(t[f].Data), "\n"), "\n")
		if len(lines) == 0 || lines[0] == "" {
			return nil, fmt.Errorf("%s %s: no header line (a TSV table starts with its column names)", side, show(f))
		}
		header := strings.Split(strings.TrimSuffix(lines[0], "\r"), "\t")
		if fi == 0 {
			tb.header = header
		} else if strings.Join(header, "\t") != strings.Join(tb.header, "\t") {
			return nil, fmt.Errorf("%s %s: header differs from %s's", side, show(f), show(files[0]))
		}
		for n, line := range lines[1:] {
			row := strings.Split(strings.TrimSuffix(line, "\r"), "\t")
			if len(row) != len(header) {
				return nil, fmt.Errorf("%s %s:%d: %d fields, the header has %d", side, show(f), n+2, len(row), len(header))
			}
			tb.rows = append(tb.rows, row)
		}
	}
	if tb.header == nil {
		return nil, fmt.Errorf("the %s output has no TSV file", side)
	}
	return tb, nil
}

// TSV compares tables of tab-separated values whose first line is the
// header. Without orderedColumns the columns are matched by name; without
// orderedRows the rows are compared as a multiset.
func TSV(expected, actual Tree, orderedRows, orderedColumns bool) ([]string, error) {
	want, err := readTable(expected, "expected")
	if err != nil {
		return nil, err
	}
	got, err := readTable(actual, "actual")
	if err != nil {
		return nil, err
	}
	wh, gh := strings.Join(want.header, ", "), strings.Join(got.header, ", ")
	if orderedColumns {
		if wh != gh {
			return []string{fmt.Sprintf("columns differ: expected %s; got %s", wh, gh)}, nil
		}
	} else {
		idx := map[string]int{}
		for i, c := range got.header {
			idx[c] = i
		}
		ws, gs := append([]string(nil), want.header...), append([]string(nil), got.header...)
		sort.Strings(ws)
		sort.Strings(gs)
		if strings.Join(ws, "\t") != strings.Join(gs, "\t") || len(idx) != len(got.header) {
			return []string{fmt.Sprintf("columns differ: expected %s; got %s (in any order)", wh, gh)}, nil
		}
		for r, row := range got.rows {
			re := make([]string, len(row))
			for i, c := range want.header {
				re[i] = row[idx[c]]
			}
			got.rows[r] = re
		}
	}
	join := func(rows [][]string) []string {
		out := make([]string, len(rows))
		for i, r := range rows {
			out[i] = strings.Join(r, "\t")
		}
		return out
	}
	wrows, grows := join(want.rows), join(got.rows)
	if orderedRows {
		if strings.Join(wrows, "\n") == strings.Join(grows, "\n") {
			return nil, nil
		}
		nl := func(rows []string) []string {
			out := make([]string, len(rows))
			for i, r := range rows {
				out[i] = r + "\n"
			}
			return out
		}
		return []string{"rows differ (in order; columns " + wh + "):\n" + UnifiedDiff("expected", "actual", nl(wrows), nl(grows))}, nil
	}
	count := func(rows []string) map[string]int {
		m := map[string]int{}
		for _, r := range rows {
			m[r]++
		}
		return m
	}
	return multisetDiff(count(wrows), count(grows), "row"), nil
}
