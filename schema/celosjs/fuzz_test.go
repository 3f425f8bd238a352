package celosjs

import (
	"io/fs"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/parser"
)

// FuzzQuote: every string the JavaScript can produce is written as a CUE
// string literal that reads back as the same string (a backslash, "\(",
// quotes, control characters, any Unicode).
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "plain", `a "quoted" \(not interpolated) value`, "tab\tnew\nline\x00\x7f", "${year}/\\", "ünïcødé ☃ 𝄞", `\u0041`, "%s%%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			s = strings.ToValidUTF8(s, "\uFFFD")
		}
		src := "x: " + quote(s) + "\n"
		file, err := parser.ParseFile("q.cue", src)
		if err != nil {
			t.Fatalf("quote(%q) = %s does not parse: %v", s, quote(s), err)
		}
		lit, ok := file.Decls[0].(*ast.Field).Value.(*ast.BasicLit)
		if !ok {
			t.Fatalf("quote(%q) = %s is not a plain literal", s, quote(s))
		}
		got, err := literal.Unquote(lit.Value)
		if err != nil || got != s {
			t.Fatalf("quote(%q) = %s reads back as %q (%v)", s, quote(s), got, err)
		}
	})
}

// FuzzNames: whatever a comment quotes (a file name, a helper's name or
// parameter list), the comment ends where it should: the line after it
// is the only declaration; and whatever a JavaScript file is called, the
// CUE file made from it is a name CUE loads (not hidden, not ignored,
// valid UTF-8, in the directory), distinct from the taken names in any
// case.
func FuzzNames(f *testing.F) {
	for _, s := range []string{"w.js", "_common.js", ".js", "..js", "Project.js", "new\nline.js", "\xff.js", "a\u2028b", "dc /*\nx: 1\n//*/", "-x.js"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		src := "// From " + commentSafe(s) + ".\nx: 1\n"
		file, err := parser.ParseFile("c.cue", src)
		if err != nil {
			t.Fatalf("comment of %q does not parse: %v", s, err)
		}
		if len(file.Decls) != 1 {
			t.Fatalf("comment of %q: %d declarations, want 1", s, len(file.Decls))
		}
		path := "dir/" + strings.ReplaceAll(s, "/", "")
		taken := map[string]bool{"project.cue": true, "defaults.cue": true}
		name := cueFileName(path, taken)
		if !utf8.ValidString(name) || !fs.ValidPath(name) || strings.ContainsAny(name, "/\\:") ||
			strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || !strings.HasSuffix(name, ".cue") ||
			strings.ContainsFunc(name, unicode.IsControl) {
			t.Fatalf("cueFileName(%q) = %q: not a name CUE loads", path, name)
		}
		if taken[strings.ToLower(name)] {
			t.Fatalf("cueFileName(%q) = %q: taken", path, name)
		}
	})
}
