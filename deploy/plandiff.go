package deploy

// The content diff of the plan's changed files: a unified diff for text
// files, sizes only for binary ones.

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/celos-go/celos/targets"
)

// Bounds of a file's diff: larger files are listed by size only.
const (
	maxDiffBytes = 512 << 10
	maxDiffLines = 10000
)

// DefaultDiffLines is how many lines of a file's diff WriteText shows
// (celos plan --diff shows all).
const DefaultDiffLines = 40

// addTextDiffs fills in the unified diff of each changed file of p whose
// old and new versions are both text (UTF-8 without control characters
// other than tab, CR and form feed, at most maxDiffBytes and
// maxDiffLines), and marks the others binary or too large.
func addTextDiffs(p *Plan, hfs targets.FS, live string, tree *localTree, listed map[string]fs.FileInfo) error {
	local := map[string]string{}
	for _, f := range tree.files {
		local[f.rel] = f.path
	}
	for i := range p.FilesChanged {
		fc := &p.FilesChanged[i]
		if fc.OldSize > maxDiffBytes || fc.NewSize > maxDiffBytes {
			fc.NoDiff = fmt.Sprintf("larger than %s", HumanBytes(maxDiffBytes))
			continue
		}
		newData, err := readLocalBounded(local[fc.Path])
		if err != nil {
			return err
		}
		oldData, err := readListed(hfs, path.Join(live, fc.Path), listed[fc.Path])
		if err != nil {
			return fmt.Errorf("read %s: %w", shown(fc.Path), err)
		}
		if !isText(oldData) || !isText(newData) {
			fc.NoDiff = "binary"
			continue
		}
		a, b := splitLines(oldData), splitLines(newData)
		if len(a) > maxDiffLines || len(b) > maxDiffLines {
			fc.NoDiff = fmt.Sprintf("more than %d lines", maxDiffLines)
			continue
		}
		d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: a, B: b, FromFile: "deployed/" + fc.Path, ToFile: "new/" + fc.Path, Context: 3,
		})
		if err != nil {
			return fmt.Errorf("diff %s: %w", fc.Path, err)
		}
		fc.Diff = d
	}
	return nil
}

// readListed reads the remote file listed as info (openListed), at
// most maxDiffBytes.
func readListed(hfs targets.FS, name string, info fs.FileInfo) ([]byte, error) {
	f, err := openListed(hfs, name, info)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxDiffBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s%s: %w", hfs, shown(name), err)
	}
	if len(data) > maxDiffBytes {
		return nil, fmt.Errorf("%s%s grew since it was listed; run the plan again", hfs, name)
	}
	return data, nil
}

// splitLines splits data after each newline; a last line without one
// gets one (difflib.SplitLines would add an empty line after a final
// newline).
func splitLines(data []byte) []string {
	lines := strings.SplitAfter(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	} else {
		lines[len(lines)-1] += "\n"
	}
	return lines
}

// readLocalBounded reads at most maxDiffBytes+1 bytes of a file of the
// tree, opened as every read of hdfs/ is (openLocal: a symbolic link or
// a FIFO put there since the scan is refused, never followed or waited
// on).
func readLocalBounded(name string) ([]byte, error) {
	f, err := openLocal(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxDiffBytes+1))
}

// isText reports whether data reads as text: UTF-8, no NUL and no control
// characters but tab, newline, CR and form feed (so a diff printed to a
// terminal or a CI log cannot carry escape sequences).
func isText(data []byte) bool {
	if !utf8.Valid(data) {
		return false
	}
	for _, c := range data {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' || c == 0x7f {
			return false
		}
	}
	return true
}

// writeDiff prints a file's diff indented, at most maxLines lines of it
// (all when maxLines < 0), saying how many were left out.
func writeDiff(w io.Writer, diff string, maxLines int) {
	lines := strings.SplitAfter(strings.TrimSuffix(diff, "\n"), "\n")
	shown := lines
	if maxLines >= 0 && len(lines) > maxLines {
		shown = lines[:maxLines]
	}
	var b bytes.Buffer
	for _, l := range shown {
		b.WriteString("      ")
		b.WriteString(strings.TrimSuffix(l, "\n"))
		b.WriteByte('\n')
	}
	if left := len(lines) - len(shown); left > 0 {
		fmt.Fprintf(&b, "      ... %d more line(s) of diff; --diff shows all\n", left)
	}
	w.Write(b.Bytes())
}
