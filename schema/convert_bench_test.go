package schema

import (
	"strconv"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/load"
	"cuelang.org/go/cue/token"
)

// BenchmarkConvert1000 measures the conversion of the evaluated project of
// 1,000 workflows alone (evaluation outside the timing): the walker
// (walk.go) against an idea measured and not kept, exporting the evaluated
// value to syntax (cue.Value.Syntax, one evaluation context for the whole
// export) and walking the tree (countAST, the least such a conversion
// would do). See docs/benchmarks.md, "Converting through Value.Syntax"
// among what was tried for issue 18 item 5 and not kept.
//
//	syntax-root            Syntax of the workflows struct, then the walk
//	syntax-root-only       the Syntax alone
//	syntax-each            Syntax of each workflow, then the walk
//	syntax-root-docsfalse  as syntax-root with cue.Docs(false), which in
//	                       cuelang.org/go v0.17.1 turns documentation ON
//	fields-only            listing the workflows, which every variant does
func BenchmarkConvert1000(b *testing.B) {
	dir := b.TempDir()
	writeBenchProject(b, dir, 1000)
	inst := load.Instances([]string{"."}, &load.Config{Dir: dir, Env: []string{"CUE_REGISTRY=none"}})[0]
	if inst.Err != nil {
		b.Fatal(inst.Err)
	}
	pv := cuecontext.New().BuildInstance(inst)
	if err := pv.Validate(cue.Concrete(true)); err != nil {
		b.Fatal(err)
	}
	wfs := pv.LookupPath(cue.ParsePath("workflows"))
	// f returns what it converted (workflows or leaves), only so that
	// nothing it does can be optimised away.
	run := func(b *testing.B, f func() int) {
		b.ReportAllocs()
		b.ResetTimer()
		start := cpuTime()
		n := 0
		for i := 0; i < b.N; i++ {
			n += f()
		}
		b.ReportMetric(float64((cpuTime()-start).Milliseconds())/float64(b.N), "cpu-ms/op")
		if n == 0 && b.N > 0 {
			b.Fatal("nothing converted")
		}
	}
	b.Run("walker", func(b *testing.B) {
		run(b, func() int {
			it, err := wfs.Fields()
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for it.Next() {
				if _, ok := walkWorkflow(it.Selector().Unquoted(), it.Value()); !ok {
					b.Fatal("walker refused")
				}
				n++
			}
			return n
		})
	})
	b.Run("syntax-root", func(b *testing.B) {
		run(b, func() int {
			n := wfs.Syntax(cue.Final(), cue.Concrete(true), cue.Attributes(false))
			return countAST(b, n)
		})
	})
	b.Run("syntax-root-only", func(b *testing.B) {
		run(b, func() int {
			if wfs.Syntax(cue.Final(), cue.Concrete(true), cue.Attributes(false)) == nil {
				b.Fatal("no syntax")
			}
			return 1
		})
	})
	b.Run("syntax-root-docsfalse", func(b *testing.B) {
		run(b, func() int {
			n := wfs.Syntax(cue.Final(), cue.Concrete(true), cue.Docs(false), cue.Attributes(false))
			return countAST(b, n)
		})
	})
	b.Run("syntax-each", func(b *testing.B) {
		run(b, func() int {
			it, err := wfs.Fields()
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for it.Next() {
				n += countAST(b, it.Value().Syntax(cue.Final(), cue.Concrete(true), cue.Attributes(false)))
			}
			return n
		})
	})
	b.Run("fields-only", func(b *testing.B) {
		run(b, func() int {
			it, err := wfs.Fields()
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for it.Next() {
				_ = it.Value()
				n++
			}
			return n
		})
	})
}

// countAST walks a concrete exported tree as a conversion would: labels
// and strings unquoted, integers parsed; it returns the number of leaves.
func countAST(b *testing.B, n ast.Node) int {
	switch x := n.(type) {
	case *ast.StructLit:
		c := 0
		for _, d := range x.Elts {
			f, ok := d.(*ast.Field)
			if !ok {
				b.Fatalf("not a field: %T", d)
			}
			switch l := f.Label.(type) {
			case *ast.Ident:
				_ = l.Name
			case *ast.BasicLit:
				if _, err := literal.Unquote(l.Value); err != nil {
					b.Fatal(err)
				}
			default:
				b.Fatalf("label %T", f.Label)
			}
			c += countAST(b, f.Value)
		}
		return c
	case *ast.ListLit:
		c := 0
		for _, e := range x.Elts {
			c += countAST(b, e)
		}
		return c
	case *ast.BasicLit:
		switch x.Kind {
		case token.STRING:
			if _, err := literal.Unquote(x.Value); err != nil {
				b.Fatal(err)
			}
		case token.INT:
			if _, err := strconv.ParseInt(x.Value, 0, 64); err != nil {
				b.Fatal(err)
			}
		default:
			b.Fatalf("literal %v", x.Kind)
		}
		return 1
	case *ast.UnaryExpr:
		return countAST(b, x.X)
	case *ast.Ident:
		// true, false, null
		return 1
	default:
		b.Fatalf("node %T", n)
	}
	return 0
}
