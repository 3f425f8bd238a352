package schema

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/schema/workflow"

	"github.com/rogpeppe/go-internal/txtar"
)

// update rewrites golden files and expected diagnostics instead of
// comparing with them.
var update = os.Getenv("CELOS_UPDATE_GOLDEN") != ""

// validProjects are compiled and compared with testdata/golden/NAME.json.
var validProjects = map[string]string{
	"wordcount":  "../testdata/projects/valid/wordcount",
	"everything": "../testdata/projects/valid/everything",
	"raw":        "../testdata/projects/valid/raw",
	"demo":       "../testdata/demo",
	"triggers":   "../testdata/projects/valid/triggers",
}

func TestCompileGolden(t *testing.T) {
	for name, dir := range validProjects {
		t.Run(name, func(t *testing.T) {
			p, diags, err := Compile(dir)
			if err != nil {
				t.Fatalf("Compile(%s): %v", dir, err)
			}
			for _, d := range diags {
				if !d.Warning {
					t.Errorf("error diagnostic without error: %v", d)
				}
			}
			got, err := p.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("..", "testdata", "golden", name+".json")
			if update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (CELOS_UPDATE_GOLDEN=1 writes it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("compiled %s differs from %s (CELOS_UPDATE_GOLDEN=1 rewrites it):\n%s", dir, golden, got)
			}
			// The same input gives byte-identical output.
			p2, _, err := Compile(dir)
			if err != nil {
				t.Fatal(err)
			}
			if again, _ := p2.Marshal(); !bytes.Equal(got, again) {
				t.Errorf("second compilation differs")
			}
			// The loader accepts what the compiler writes, unchanged.
			loaded, err := workflow.Load(bytes.NewReader(got))
			if err != nil {
				t.Fatalf("Load(compiled %s): %v", name, err)
			}
			if back, _ := loaded.Marshal(); !bytes.Equal(got, back) {
				t.Errorf("Load then Marshal differs from the compiled document")
			}
		})
	}
}

// TestCompileCases runs testdata/projects/invalid/*.txtar: each archive
// holds the files of a project (under proj/ unless a name says otherwise)
// and a "want" file with the diagnostics Compile("proj") must report,
// "file:line:col: message" per line. Lines without "warning:" mean the
// project is invalid. CELOS_UPDATE_GOLDEN=1 rewrites the want files.
func TestCompileCases(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "projects", "invalid", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txtar")
		t.Run(name, func(t *testing.T) {
			abs, _ := filepath.Abs(file)
			ar, err := txtar.ParseFile(abs)
			if err != nil {
				t.Fatal(err)
			}
			work := t.TempDir()
			var want string
			wantIdx := -1
			for i, f := range ar.Files {
				if f.Name == "want" {
					want, wantIdx = string(f.Data), i
					continue
				}
				dst := filepath.Join(work, filepath.FromSlash(f.Name))
				if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
					t.Fatal(err)
				}
				data := f.Data
				if strings.HasSuffix(f.Name, ".latin1") {
					// A file that is not UTF-8: txtar holds it as UTF-8.
					dst = strings.TrimSuffix(dst, ".latin1")
					data = toLatin1(string(data))
				}
				if err := os.WriteFile(dst, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if wantIdx < 0 {
				t.Fatal("no want file")
			}
			t.Chdir(work)
			p, diags, err := Compile("proj")
			var b strings.Builder
			invalid := false
			for _, d := range diags {
				b.WriteString(d.String() + "\n")
				invalid = invalid || !d.Warning
			}
			got := b.String()
			if invalid != (err != nil) || invalid != (p == nil) {
				t.Errorf("invalid=%v but err=%v, project=%v", invalid, err, p != nil)
			}
			if err != nil {
				if _, ok := err.(Diagnostics); !ok {
					t.Errorf("error is %T, want Diagnostics", err)
				}
				for _, line := range strings.Split(err.Error(), "\n") {
					if !strings.Contains(got, line+"\n") || strings.Contains(line, "warning:") {
						t.Errorf("error line %q is not an error diagnostic", line)
					}
				}
			}
			if update {
				ar.Files[wantIdx].Data = []byte(got)
				if err := os.WriteFile(abs, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != want {
				t.Errorf("diagnostics:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func toLatin1(s string) []byte {
	var out []byte
	for _, r := range s {
		out = append(out, byte(r))
	}
	return out
}

func TestDiagnosticsError(t *testing.T) {
	ds := Diagnostics{{Pos: "a.cue:1:2", Msg: "bad"}, {Pos: "b.cue:3:4", Msg: "worse"}}
	if got, want := ds.Error(), "a.cue:1:2: bad\nb.cue:3:4: worse"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := (Diagnostic{Pos: "x", Msg: "m", Warning: true}).String(); got != "x: warning: m" {
		t.Errorf("String() = %q", got)
	}
}

func TestSchemaFilesVendoredCompare(t *testing.T) {
	dir := t.TempDir()
	if differs, _ := VendoredSchemaDiffers(filepath.Join(dir, "none")); differs {
		t.Error("a missing vendor directory differs")
	}
	for _, f := range SchemaFiles() {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if differs, why := VendoredSchemaDiffers(dir); differs {
		t.Errorf("an exact copy differs: %s", why)
	}
	os.WriteFile(filepath.Join(dir, "extra.cue"), []byte("package celos\n"), 0o644)
	if differs, why := VendoredSchemaDiffers(dir); !differs || !strings.Contains(why, "extra.cue") {
		t.Errorf("extra file: differs=%v %q", differs, why)
	}
}

// TestSchemaConstantsAgree: the CUE schema and the Go contract share their
// limits and defaults.
func TestSchemaConstantsAgree(t *testing.T) {
	dir := t.TempDir()
	src := "package p\n\nproject: \"p\"\n"
	if err := os.WriteFile(filepath.Join(dir, "p.cue"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	p, _, err := Compile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := p.Marshal(); !strings.Contains(string(out), `"workflows": []`) {
		t.Errorf("a project without workflows:\n%s", out)
	}
	var schemaText strings.Builder
	for _, f := range SchemaFiles() {
		schemaText.Write(f.Data)
	}
	for _, want := range []string{
		fmt.Sprintf("#MaxTriggerDepth: %d\n", workflow.MaxTriggerDepth),
		fmt.Sprintf("#NeverTimeout: %d\n", workflow.NeverTimeout),
		fmt.Sprintf("#MaxTriggerSeconds: %d\n", workflow.MaxTriggerSeconds),
		fmt.Sprintf("startTime: *%q", workflow.DefaultStartTime.Format(time.RFC3339)),
		fmt.Sprintf("for d in [%s]", depthList()),
	} {
		if !strings.Contains(schemaText.String(), want) {
			t.Errorf("schema/*.cue lacks %q", want)
		}
	}
}

func depthList() string {
	var ds []string
	for d := workflow.MaxTriggerDepth; d >= 1; d-- {
		ds = append(ds, fmt.Sprint(d))
	}
	return strings.Join(ds, ", ")
}
