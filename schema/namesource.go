package schema

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/parser"
)

// maxNameSourceFile bounds what NameSource reads of one file.
const maxNameSourceFile = 4 << 20

// NameSource says where the name of the project in dir comes from, for
// messages such as deploy's "--project X does not match the project's
// name": `the project: field at project.cue:5:1` when a file sets the
// top-level project field, else `its CUE package name "wc" (no project:
// field)`. It reads only the .cue files of dir itself, and answers
// something sensible for files it cannot read or parse.
func NameSource(dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "its project: field, else its CUE package name"
	}
	pkg := ""
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".cue") || strings.HasPrefix(e.Name(), ".") || strings.HasPrefix(e.Name(), "_") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := readBounded(path)
		if err != nil {
			continue
		}
		f, err := parser.ParseFile(path, data)
		if err != nil {
			continue
		}
		if pkg == "" {
			pkg = f.PackageName()
		}
		for _, d := range f.Decls {
			field, ok := d.(*ast.Field)
			if !ok {
				continue
			}
			if name, _, _ := ast.LabelName(field.Label); name == "project" {
				pos := field.Pos()
				return fmt.Sprintf("the project: field at %s:%d:%d", filepath.Join(dir, e.Name()), pos.Line(), pos.Column())
			}
		}
	}
	if pkg == "" {
		return "its CUE package name"
	}
	return fmt.Sprintf("its CUE package name %q (no project: field)", pkg)
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxNameSourceFile))
}
