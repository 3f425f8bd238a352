package schema

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"cuelang.org/go/cue/token"
)

// Diagnostic is one problem found in a project, at a position.
type Diagnostic struct {
	// Pos is "file:line:col" with file relative to the working directory
	// (absolute when the directory was named by an absolute path and lies
	// outside the working directory), or just a file or directory name when
	// there is no line.
	Pos string
	// Msg says what is wrong; it starts with the CUE path of the value
	// concerned when there is one (workflows.wordcount.schedule.cron: ...).
	Msg string
	// Warning marks a diagnostic that does not make the project invalid.
	Warning bool
}

// String is "pos: msg", or "pos: warning: msg" for a warning.
func (d Diagnostic) String() string {
	msg := d.Msg
	if d.Warning {
		msg = "warning: " + msg
	}
	if d.Pos == "" {
		return msg
	}
	return d.Pos + ": " + msg
}

// Diagnostics is the error Compile returns for an invalid project: every
// error-level diagnostic, in order.
type Diagnostics []Diagnostic

// Error lists the diagnostics, one "file:line:col: message" per line.
func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// reportRefused reports the files the compiler's file system refused to
// read, by name and reason, and says whether there were any.
func (c *compiler) reportRefused() bool {
	refused := c.fsys.refusals()
	for _, r := range refused {
		if pos, ok := c.embedPos[r.path]; ok {
			c.errorf(c.pos(pos), "@embed of %s: %v", c.rel(r.path), r.err)
			continue
		}
		c.errorf(c.rel(r.path), "%v", r.err)
	}
	return len(refused) > 0
}

func (c *compiler) errorf(pos, format string, args ...any) {
	c.diags = append(c.diags, Diagnostic{Pos: pos, Msg: oneLine(fmt.Sprintf(format, args...))})
}

// oneLine keeps a message on one line (CUE's may span several).
func oneLine(s string) string {
	s = strings.TrimRight(s, "\n:")
	if !strings.Contains(s, "\n") {
		return s
	}
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, " ")
}

func (c *compiler) warnf(pos, format string, args ...any) {
	c.diags = append(c.diags, Diagnostic{Pos: pos, Msg: fmt.Sprintf(format, args...), Warning: true})
}

func (c *compiler) failed() bool {
	for _, d := range c.diags {
		if !d.Warning {
			return true
		}
	}
	return false
}

// sorted returns the diagnostics without duplicates, ordered by file, line
// and column (diagnostics without a line first, in the order found).
func (c *compiler) sorted() []Diagnostic {
	type key struct {
		file      string
		line, col int
	}
	parse := func(pos string) key {
		var k key
		f := pos
		// file:line:col, where file may itself contain colons.
		if i := strings.LastIndexByte(f, ':'); i > 0 {
			if j := strings.LastIndexByte(f[:i], ':'); j > 0 {
				var line, col int
				if _, err := fmt.Sscanf(f[j+1:], "%d:%d", &line, &col); err == nil {
					return key{f[:j], line, col}
				}
			}
		}
		k.file = f
		return k
	}
	seen := map[Diagnostic]bool{}
	var out []Diagnostic
	for _, d := range c.diags {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := parse(out[i].Pos), parse(out[j].Pos)
		if (a.line == 0) != (b.line == 0) {
			return a.line == 0
		}
		if a.file != b.file {
			return a.file < b.file
		}
		if a.line != b.line {
			return a.line < b.line
		}
		return a.col < b.col
	})
	return out
}

// rel makes an absolute file name relative to the working directory when
// it lies below it.
func (c *compiler) rel(path string) string {
	if c.schemaDir != "" && strings.HasPrefix(path, c.schemaDir+string(filepath.Separator)) {
		// The embedded schema (possibly overlaid on a vendored copy).
		return SchemaImportPath + "/" + filepath.Base(path)
	}
	if c.cwd != "" && filepath.IsAbs(path) {
		if r, err := filepath.Rel(c.cwd, path); err == nil {
			below := r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator))
			// Above the working directory, relative only when the
			// directory was named relatively.
			if below || !c.absArg {
				return r
			}
		}
	}
	return path
}

func (c *compiler) pos(p token.Pos) string {
	if !p.IsValid() {
		return ""
	}
	if p.Line() == 0 {
		return c.rel(p.Filename())
	}
	return fmt.Sprintf("%s:%d:%d", c.rel(p.Filename()), p.Line(), p.Column())
}

func (c *compiler) inSchema(p token.Pos) bool {
	if c.checkFile != "" && p.Filename() == c.checkFile {
		return true
	}
	return c.schemaDir != "" && strings.HasPrefix(p.Filename(), c.schemaDir+string(filepath.Separator))
}

// userPos picks the position to report: the first one in the project's own
// files, else the first one at all.
func (c *compiler) userPos(ps []token.Pos) (token.Pos, bool) {
	for _, p := range ps {
		if p.IsValid() && !c.inSchema(p) {
			return p, true
		}
	}
	for _, p := range ps {
		if p.IsValid() {
			return p, false
		}
	}
	return token.NoPos, false
}
