package schema

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad feeds the compiled-document loader arbitrary bytes, seeded with
// the golden documents: it must never panic, and what it accepts must be
// valid and survive Marshal and Load unchanged.
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("..", "testdata", "golden", "*.json"))
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"format":"celos.dev/workflows/v1","project":"p","workflows":[]}`))
	f.Add([]byte(`{"format":"celos.dev/workflows/v2"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Load(bytes.NewReader(data))
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("Load accepted an invalid project: %v", err)
		}
		out, err := p.Marshal()
		if err != nil {
			t.Fatalf("Marshal of a loaded project: %v", err)
		}
		p2, err := Load(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("Load of a marshalled project: %v\n%s", err, out)
		}
		out2, err := p2.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, out2) {
			t.Fatalf("Marshal/Load is not stable:\n%s\n---\n%s", out, out2)
		}
	})
}
