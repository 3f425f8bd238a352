package celosjs

import (
	"strings"
	"testing"
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
