package schema

import (
	"bytes"
	"embed"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/celos-go/celos/internal/regfile"
)

// The CUE schema: the single source of truth for what a project may say.
// The same files are vendored into a project by `celos init`.
//
//go:embed *.cue
var schemaFS embed.FS

// SchemaImportPath is the CUE import path of the schema package.
const SchemaImportPath = "celos.dev/celos"

// SchemaVendorDir is where `celos init` vendors the schema inside a project
// (relative to the CUE module root), so that plain `cue vet` resolves
// SchemaImportPath offline.
const SchemaVendorDir = "cue.mod/pkg/" + SchemaImportPath

// SchemaFile is one file of the embedded CUE schema.
type SchemaFile struct {
	Name string // base name, e.g. "trigger.cue"
	Data []byte
}

// SchemaFiles returns the embedded CUE schema files, sorted by name.
func SchemaFiles() []SchemaFile {
	entries, err := fs.ReadDir(schemaFS, ".")
	if err != nil {
		panic(err) // embedded: cannot fail
	}
	var out []SchemaFile
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".cue") {
			continue
		}
		data, err := schemaFS.ReadFile(e.Name())
		if err != nil {
			panic(err)
		}
		out = append(out, SchemaFile{Name: e.Name(), Data: data})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// VendoredSchemaDiffers reports whether dir (a vendored copy of the schema,
// e.g. <module root>/cue.mod/pkg/celos.dev/celos) holds something other
// than exactly the embedded schema files, and a short reason. A directory
// that does not exist does not differ (there is nothing vendored).
func VendoredSchemaDiffers(dir string) (bool, string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return false, ""
		}
		return true, err.Error()
	}
	want := map[string][]byte{}
	for _, f := range SchemaFiles() {
		want[f.Name] = f.Data
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".cue") {
			continue
		}
		data, ok := want[e.Name()]
		if !ok {
			return true, "it has a file " + e.Name() + " that this celos's schema does not"
		}
		// Read as the compiler reads a project: a regular file, bounded.
		got, err := regfile.ReadFile(filepath.Join(dir, e.Name()), MaxInputFileSize)
		if err != nil {
			return true, e.Name() + ": " + unwrapPathError(err).Error()
		}
		if !bytes.Equal(got, data) {
			return true, e.Name() + " differs"
		}
		seen[e.Name()] = true
	}
	for _, f := range SchemaFiles() {
		if !seen[f.Name] {
			return true, f.Name + " is missing"
		}
	}
	return false, ""
}
