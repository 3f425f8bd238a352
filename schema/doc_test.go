package schema

import (
	"testing"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/parser"
)

// TestSchemaDocumented checks that every definition and field of the
// embedded schema has a documentation comment: the schema is the
// reference manual, and `celos init` vendors it into every project.
func TestSchemaDocumented(t *testing.T) {
	files := SchemaFiles()
	if len(files) == 0 {
		t.Fatal("no embedded schema files")
	}
	for _, sf := range files {
		f, err := parser.ParseFile(sf.Name, sf.Data, parser.ParseComments)
		if err != nil {
			t.Fatalf("parse %s: %v", sf.Name, err)
		}
		// Fields written inline in a documented field's value
		// (`#Hourly: #Cron & {cron: "..."}`) are part of that field's
		// documentation.
		var lines []int // lines of the enclosing fields
		ast.Walk(f, func(n ast.Node) bool {
			field, ok := n.(*ast.Field)
			if !ok {
				return true
			}
			inline := len(lines) > 0 && field.Pos().Line() == lines[len(lines)-1]
			lines = append(lines, field.Pos().Line())
			switch field.Label.(type) {
			case *ast.ListLit, *ast.Interpolation:
				// A pattern, or a generated label (#TriggerAt's levels):
				// documented with the enclosing definition.
				return true
			}
			if inline {
				return true
			}
			for _, cg := range ast.Comments(field) {
				if cg.Doc {
					return true
				}
			}
			name, _, _ := ast.LabelName(field.Label)
			t.Errorf("%s: %s at %v has no doc comment", sf.Name, name, field.Pos())
			return true
		}, func(n ast.Node) {
			if _, ok := n.(*ast.Field); ok {
				lines = lines[:len(lines)-1]
			}
		})
	}
}
