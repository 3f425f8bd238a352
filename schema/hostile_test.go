package schema

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/child"
)

// inChild runs body in a child process limited to 4 GiB and deadline
// (package child).
func inChild(t *testing.T, deadline time.Duration, body func() error) {
	t.Helper()
	child.Run(t, deadline, 4<<30, body)
}

// writeProject writes files (name → content) under dir.
func writeProject(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const hostileWorkflow = `
workflows: a: {
	schedule:        celos.#Hourly
	trigger:         celos.#Always
	externalService: celos.#Command & {command: ["echo"]}
}
`

// hostileProject is a valid project with a cue.mod, an imported package
// vendored in it and an embedded file, all of which a test may replace.
func hostileProject(t *testing.T, dir string) {
	writeProject(t, dir, map[string]string{
		"cue.mod/module.cue":                "module: \"example.com/p\"\nlanguage: version: \"v0.17.0\"\n",
		"cue.mod/pkg/example.com/lib/l.cue": "package lib\n\nx: 1\n",
		"p.cue":                             "@extern(embed)\n\npackage p\n\nimport (\n\t\"celos.dev/celos\"\n\t\"example.com/lib\"\n)\n\n_l:    lib.x\n_data: _ @embed(file=data.json)\n" + hostileWorkflow,
		"q.cue":                             "package p\n",
		"data.json":                         "{}\n",
	})
	for _, f := range SchemaFiles() {
		writeProject(t, dir, map[string]string{"cue.mod/pkg/celos.dev/celos/" + f.Name: string(f.Data)})
	}
}

// TestCompileNonRegular: a FIFO, a device (or a symlink to one) in place
// of any file the compiler reads (a .cue file of the package, cue.mod's
// module file, an imported package, the vendored schema, an embedded
// file) is refused at once, naming the file, instead of hanging or
// reading /dev/zero until memory runs out.
func TestCompileNonRegular(t *testing.T) {
	for _, kind := range []string{"fifo", "devzero", "devnull"} {
		for _, file := range []string{"q.cue", "x.cue", "cue.mod/module.cue", "cue.mod/pkg/example.com/lib/l.cue", "cue.mod/pkg/celos.dev/celos/project.cue", "data.json"} {
			t.Run(kind+"-"+strings.ReplaceAll(file, "/", "_"), func(t *testing.T) {
				inChild(t, 2*time.Minute, func() error {
					dir := t.TempDir()
					hostileProject(t, dir)
					if p, _, err := Compile(dir); err != nil || p == nil {
						return fmt.Errorf("the project before the change: %v", err)
					}
					p := filepath.Join(dir, filepath.FromSlash(file))
					os.Remove(p)
					var err error
					switch kind {
					case "fifo":
						err = syscall.Mkfifo(p, 0o644)
					case "devzero":
						err = os.Symlink("/dev/zero", p)
					case "devnull":
						err = os.Symlink("/dev/null", p)
					}
					if err != nil {
						return err
					}
					proj, diags, err := Compile(dir)
					if file == "cue.mod/pkg/celos.dev/celos/project.cue" {
						// celos compiles with its own schema: the vendored
						// copy is only compared, and a warning names it.
						if err != nil || proj == nil {
							return fmt.Errorf("a vendored schema file that is a %s: %v", kind, err)
						}
						for _, d := range diags {
							if d.Warning && strings.Contains(d.String(), "project.cue: ") && strings.Contains(d.Msg, "not a regular file") {
								return nil
							}
						}
						return fmt.Errorf("want a warning naming project.cue as not a regular file, got %v", diags)
					}
					if err == nil || proj != nil {
						return fmt.Errorf("compiled with %s a %s: %v", file, kind, diags)
					}
					found := false
					for _, d := range diags {
						if strings.Contains(d.String(), file) && strings.Contains(d.Msg, "not a regular file") {
							found = true
						}
					}
					if !found {
						return fmt.Errorf("want a diagnostic naming %s as not a regular file, got %v", file, diags)
					}
					return nil
				})
			})
		}
	}
}

// TestCompileBoundsFileSize: a .cue file longer than MaxInputFileSize is
// refused after reading no more than that.
func TestCompileBoundsFileSize(t *testing.T) {
	dir := t.TempDir()
	hostileProject(t, dir)
	big := "package p\n\n// " + strings.Repeat("x", MaxInputFileSize) + "\n"
	writeProject(t, dir, map[string]string{"big.cue": big})
	_, diags, err := Compile(dir)
	if err == nil || !strings.Contains(Diagnostics(diags).Error(), "big.cue: larger than 64 MiB") {
		t.Fatalf("want big.cue refused as larger than 64 MiB, got %v", diags)
	}
}

const secret = "TOPSECRET-8c1f"

// TestEmbedOutsideModule: @embed of a file whose real path leaves the
// module (a symlink to a file outside, a symlinked directory, a chain of
// symlinks) is refused with a diagnostic naming the file, and the file's
// content appears nowhere; a symlink that stays inside the module is
// embedded as before.
func TestEmbedOutsideModule(t *testing.T) {
	outside := t.TempDir()
	writeProject(t, outside, map[string]string{
		"secret.json":     `{"pw": "` + secret + `"}`,
		"dir/secret.json": `{"pw": "` + secret + `"}`,
		"secret.cue":      "package p\n\n_pw: \"" + secret + "\"\n",
	})
	head := "@extern(embed)\n\npackage p\n\nimport \"celos.dev/celos\"\n\n"
	wf := func(expr string) string {
		return head + `
workflows: a: {
	schedule:        celos.#Hourly
	trigger:         celos.#Always
	externalService: celos.#Command & {command: ["echo", ` + expr + `]}
}
`
	}
	for _, tc := range []struct {
		name    string
		src     string
		links   map[string]string // link → target (relative to the project, or absolute)
		bad     string            // the file the diagnostic names; "" for a valid project
		content string            // wanted in the output of a valid project
	}{
		{"file", wf("_s.pw") + "_s: _ @embed(file=secret.json)\n", map[string]string{"secret.json": filepath.Join(outside, "secret.json")}, "secret.json", ""},
		{"dir", wf("_s[\"data/secret.json\"].pw") + "_s: _ @embed(glob=data/*.json)\n", map[string]string{"data": filepath.Join(outside, "dir")}, "data/secret.json", ""},
		{"chain", wf("_s.pw") + "_s: _ @embed(file=a.json)\n", map[string]string{"a.json": "b.json", "b.json": filepath.Join(outside, "secret.json")}, "a.json", ""},
		{"relative", wf("_s.pw") + "_s: _ @embed(file=sub/s.json)\n", map[string]string{"sub/s.json": "(relative path to the secret)"}, "sub/s.json", ""},
		{"cue file", wf("_pw"), map[string]string{"s.cue": filepath.Join(outside, "secret.cue")}, "s.cue", ""},
		{"inside", wf("_s.pw") + "_s: _ @embed(file=link.json)\n", map[string]string{"link.json": "real/r.json"}, "", "in-the-module"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			dir := filepath.Join(base, "proj")
			writeProject(t, dir, map[string]string{"p.cue": tc.src, "real/r.json": `{"pw": "in-the-module"}`})
			for link, target := range tc.links {
				p := filepath.Join(dir, filepath.FromSlash(link))
				os.MkdirAll(filepath.Dir(p), 0o755)
				if tc.name == "relative" {
					rel, err := filepath.Rel(filepath.Dir(p), filepath.Join(outside, "secret.json"))
					if err != nil {
						t.Fatal(err)
					}
					target = rel
				}
				if err := os.Symlink(target, p); err != nil {
					t.Fatal(err)
				}
			}
			p, diags, err := Compile(dir)
			all := fmt.Sprint(diags)
			if strings.Contains(all, secret) {
				t.Fatalf("the secret leaked into the diagnostics: %s", all)
			}
			if tc.bad == "" {
				if err != nil {
					t.Fatalf("Compile: %v", err)
				}
				out, _ := p.Marshal()
				if !strings.Contains(string(out), tc.content) {
					t.Fatalf("embedded content missing:\n%s", out)
				}
				return
			}
			if err == nil {
				out, _ := p.Marshal()
				t.Fatalf("compiled, embedding a file outside the module:\n%s", out)
			}
			found := false
			for _, d := range diags {
				if strings.Contains(d.String(), tc.bad) && strings.Contains(d.Msg, "outside the module") {
					found = true
				}
			}
			if !found {
				t.Fatalf("want a diagnostic naming %s as outside the module, got %v", tc.bad, all)
			}
		})
	}
}

// TestCompileModLoop: symbolic link loops under cue.mod/pkg end the walk
// of the files CUE could read with an error, in bounded time, instead of
// leaving files unchecked or walking 2^32 paths.
func TestCompileModLoop(t *testing.T) {
	dir := t.TempDir()
	hostileProject(t, dir)
	pkg := filepath.Join(dir, "cue.mod", "pkg", "loop")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"a", "b"} {
		if err := os.Symlink(".", filepath.Join(pkg, l)); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := Compile(dir)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "symbolic link loop?") {
			t.Fatalf("want an error about the loop, got %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("Compile did not finish within 2 minutes")
	}
}

// TestCompileSkipsDotDirsInCueMod: a directory under cue.mod/pkg whose
// name starts with a dot (the .git of a vendored module), which CUE never
// loads from, is not read either: a FIFO there is no error.
func TestCompileSkipsDotDirsInCueMod(t *testing.T) {
	dir := t.TempDir()
	hostileProject(t, dir)
	git := filepath.Join(dir, "cue.mod", "pkg", "example.com", "lib", ".git")
	if err := os.MkdirAll(git, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(git, "x.cue"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, diags, err := Compile(dir); err != nil {
		t.Fatalf("Compile: %v", diags)
	}
}
