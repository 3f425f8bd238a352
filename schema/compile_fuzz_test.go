package schema

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/celos-go/celos/schema/workflow"

	"github.com/rogpeppe/go-internal/txtar"
)

// FuzzCompile compiles arbitrary single-file projects, seeded with the
// test projects: Compile must never panic (a recovered panic shows as an
// "internal error" diagnostic), every diagnostic is one line with a
// position, and an accepted project survives Marshal and Load.
func FuzzCompile(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("..", "testdata", "projects", "invalid", "*.txtar"))
	for _, s := range seeds {
		ar, err := txtar.ParseFile(s)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range ar.Files {
			if file.Name == "proj/p.cue" {
				f.Add(file.Data)
			}
		}
	}
	valid, _ := filepath.Glob(filepath.Join("..", "testdata", "projects", "valid", "*", "*.cue"))
	for _, s := range valid {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		dir := filepath.Join(t.TempDir(), "proj")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "p.cue"), src, 0o644); err != nil {
			t.Fatal(err)
		}
		walkMismatches.Lock()
		bad := len(walkMismatches.list)
		walkMismatches.Unlock()
		p, diags, err := Compile(dir)
		walkMismatches.Lock()
		if len(walkMismatches.list) > bad {
			t.Errorf("the walker and the conversion through JSON disagree:\n%s", strings.Join(walkMismatches.list[bad:], "\n"))
		}
		walkMismatches.Unlock()
		for _, d := range diags {
			if strings.Contains(d.Msg, "internal error") || strings.Contains(d.Msg, "\n") || d.Pos == "" {
				t.Errorf("diagnostic %q", d)
			}
		}
		if err != nil {
			if p != nil {
				t.Errorf("error %v with a project", err)
			}
			return
		}
		data, err := p.Marshal()
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		back, err := workflow.Load(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("Load(Marshal(Compile)): %v\n%s", err, data)
		}
		if again, _ := back.Marshal(); !bytes.Equal(again, data) {
			t.Errorf("round trip changed the document")
		}
	})
}
