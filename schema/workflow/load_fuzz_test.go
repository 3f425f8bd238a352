package workflow

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// allowedQuotes are the quoted strings Load's format errors may hold: field
// names of the format, celos format names, identifiers of unknown fields,
// the example time.
var allowedQuotes = regexp.MustCompile(`"format"|"celos\.dev/workflows/v[0-9]{1,4}"|unknown field "[A-Za-z][A-Za-z0-9_]{0,63}"|"2015-09-13T00:00:00Z"|\(expecting '.'\)`)

// quotesContent reports whether a format error quotes anything (with " or
// ') beyond allowedQuotes.
func quotesContent(msg string) bool {
	rest := allowedQuotes.ReplaceAllString(msg, "")
	return strings.ContainsAny(rest, `"'`)
}

// FuzzLoad feeds the compiled-document loader arbitrary bytes, seeded with
// the golden documents: it must never panic, what it accepts must be valid
// and survive Marshal and Load unchanged, and an error about a document
// that is not a celos document (ErrFormat, ErrVersion) quotes nothing of
// it but the allowed names (see quotesContent).
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "golden", "*.json"))
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
	f.Add([]byte(`{"format":"celos.dev/workflows/v1","project":"p","workflows":[{"id":"a","startTime":"x'y"}]}`))
	f.Add([]byte(`{"format":"celos.dev/workflows/v1","project":"p","workflows":[{"id":"a","maxRetryCount":1.5,"url":1}]}`))
	f.Add([]byte(`{"format":"celos.dev/workflows/v1","project":"p","workflows":[],"x\"y":1}`))
	f.Add([]byte("root:x:0:0:root:/root:/bin/bash\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Load(bytes.NewReader(data))
		if err != nil {
			if (errors.Is(err, ErrFormat) || errors.Is(err, ErrVersion)) && quotesContent(err.Error()) {
				t.Fatalf("Load's error quotes the document: %v", err)
			}
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
