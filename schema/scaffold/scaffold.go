// Package scaffold writes a new celos project (`celos init`): a CUE package
// with the two-data-centre wordcount example and a test case for it (with
// its fixtures under test/), the Oozie directory hdfs/, a cue.mod with the
// celos schema vendored (so that plain `cue vet -c ./...` works offline), a
// pre-commit configuration, a GitHub Actions job and a Jenkinsfile that
// vet, test and plan on pull requests and deploy from main, pinned to the
// celos version that wrote them.
package scaffold

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"text/template"

	"cuelang.org/go/mod/module"

	"github.com/celos-go/celos/internal/atomicfile"
	"github.com/celos-go/celos/schema"
	"github.com/celos-go/celos/schema/workflow"
)

//go:embed all:template
var templateFS embed.FS

// Options parameterise a new project.
type Options struct {
	// Name is the project name (default: the directory's base name).
	Name string
	// Rev is the celos version the CI files install and the pre-commit
	// hook pins: the version of the celos writing them. A version that is
	// not a release (v1.2.3) gives "main", with a comment saying to pin a
	// release tag.
	Rev string
	// Force allows writing into a directory that is not empty; files of
	// the scaffold that exist are overwritten, others are left alone.
	Force bool
}

// ErrNotEmpty is returned by Write for a directory that has files in it,
// unless Options.Force is set.
var ErrNotEmpty = fmt.Errorf("directory is not empty (use --force to write into it anyway)")

var (
	nonIdent = regexp.MustCompile(`[^A-Za-z0-9_]`)
	semver   = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)
)

// cueKeywords cannot be a package name (CUE's parser wants an identifier
// there; "package" and "import" are accepted).
var cueKeywords = map[string]bool{"for": true, "in": true, "if": true, "let": true, "true": true, "false": true, "null": true, "func": true}

// modulePath is the project's CUE module path: example.com/ and the name
// in lower case, without the leading and trailing '.', '_' and '-' CUE
// refuses in a module path element.
func modulePath(name string) string {
	elem := strings.Trim(strings.ToLower(name), "._-")
	if elem == "" || module.CheckPathWithoutVersion("example.com/"+elem) != nil {
		elem = "project"
	}
	return "example.com/" + elem
}

type data struct {
	Name, Package, Module, Rev string
	// Pinned is set when Rev is a release version.
	Pinned bool
}

// Write creates the project in dir (created if missing) and returns the
// files it wrote, relative to dir, sorted.
func Write(dir string, opt Options) ([]string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	name := opt.Name
	if name == "" {
		name = filepath.Base(abs)
	}
	if !workflow.IDPattern.MatchString(name) || name == "." || name == ".." {
		return nil, fmt.Errorf("project name %q: must match %s (use --name)", name, workflow.IDPattern)
	}
	if err := workflow.ValidateProjectName(name); err != nil {
		return nil, fmt.Errorf("%w: celos deploy would refuse it (use --name)", err)
	}
	if err := checkDir(dir, abs, opt.Force); err != nil {
		return nil, err
	}
	pkg := strings.ToLower(nonIdent.ReplaceAllString(name, "_"))
	if pkg == "" || pkg[0] >= '0' && pkg[0] <= '9' || pkg[0] == '_' || cueKeywords[pkg] {
		pkg = "p" + pkg
	}
	rev, pinned := opt.Rev, semver.MatchString(opt.Rev)
	if !pinned {
		rev = "main"
	}
	d := data{Name: name, Package: pkg, Module: modulePath(name), Rev: rev, Pinned: pinned}

	files, err := render(d)
	if err != nil {
		return nil, err
	}
	// Every directory is checked before anything is written: a link out
	// of the project refuses the whole scaffold, not its second half.
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, err
	}
	for _, f := range files {
		if err := insideBeforeMkdir(abs, filepath.Dir(filepath.Join(abs, filepath.FromSlash(f.rel)))); err != nil {
			return nil, err
		}
	}
	if err := insideBeforeMkdir(abs, filepath.Join(abs, filepath.FromSlash(schema.SchemaVendorDir))); err != nil {
		return nil, err
	}
	var written []string
	for _, f := range files {
		target := filepath.Join(abs, filepath.FromSlash(f.rel))
		if err := writeFile(target, f.data); err != nil {
			return nil, err
		}
		written = append(written, f.rel)
	}
	vendored, err := UpdateSchema(abs)
	if err != nil {
		return nil, err
	}
	written = append(written, vendored...)
	sort.Strings(written)
	return written, nil
}

// checkDir refuses a project directory that is not one (a file, a
// symbolic link to nowhere) and, unless force, one that is not empty.
func checkDir(dir, abs string, force bool) error {
	entries, err := os.ReadDir(abs)
	switch {
	case err == nil:
		if len(entries) > 0 && !force {
			return fmt.Errorf("%s: %w", dir, ErrNotEmpty)
		}
		return nil
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%s: not a directory", dir)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if target, lerr := os.Readlink(abs); lerr == nil {
		return fmt.Errorf("%s: a symbolic link to %s, which does not exist", dir, target)
	}
	return nil
}

// file is one file of the scaffold: its path relative to the project
// and its content.
type file struct {
	rel  string
	data []byte
}

// render makes the files of the scaffold from the templates, in name
// order.
func render(d data) ([]file, error) {
	var files []file
	err := fs.WalkDir(templateFS, "template", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		src, err := templateFS.ReadFile(p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, "template/")
		if strings.HasSuffix(rel, ".tmpl") {
			rel = strings.TrimSuffix(rel, ".tmpl")
			t, err := template.New(rel).Delims("[[", "]]").Option("missingkey=error").Parse(string(src))
			if err != nil {
				return fmt.Errorf("scaffold template %s: %w", rel, err)
			}
			var b bytes.Buffer
			if err := t.Execute(&b, d); err != nil {
				return fmt.Errorf("scaffold template %s: %w", rel, err)
			}
			src = b.Bytes()
		}
		files = append(files, file{rel, src})
		return nil
	})
	return files, err
}

// ErrNoModule is returned by UpdateSchema for a directory without a
// cue.mod directory: it is not the module root of a project.
var ErrNoModule = errors.New("no cue.mod directory: not the root of a celos project (celos init DIR creates one; celos vet names the root to update)")

// UpdateSchema (re)writes the vendored schema of the project whose module
// root is dir (dir/cue.mod/pkg/celos.dev/celos) from the schema built into
// celos, removing .cue files the built-in schema does not have. It returns
// the files written, relative to dir. dir must have a cue.mod directory
// (ErrNoModule otherwise); nothing is created outside it.
func UpdateSchema(dir string) ([]string, error) {
	if fi, err := os.Stat(filepath.Join(dir, "cue.mod")); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("update the schema of %s: %w", dir, ErrNoModule)
	}
	vendor := filepath.Join(dir, filepath.FromSlash(schema.SchemaVendorDir))
	// It removes .cue files: never in a directory a symbolic link in the
	// project points to elsewhere, and it makes no directory there.
	if err := insideBeforeMkdir(dir, vendor); err != nil {
		return nil, fmt.Errorf("update the schema of %s: %w", dir, err)
	}
	if err := os.MkdirAll(vendor, 0o755); err != nil {
		return nil, fmt.Errorf("update the schema of %s: %w", dir, err)
	}
	keep := map[string]bool{}
	var written []string
	for _, f := range schema.SchemaFiles() {
		if err := writeFile(filepath.Join(vendor, f.Name), f.Data); err != nil {
			return nil, err
		}
		keep[f.Name] = true
		written = append(written, path.Join(schema.SchemaVendorDir, f.Name))
	}
	entries, err := os.ReadDir(vendor)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".cue") && !keep[e.Name()] {
			if err := os.Remove(filepath.Join(vendor, e.Name())); err != nil {
				return nil, err
			}
		}
	}
	return written, nil
}

// writeFile writes a file of the project: to a temporary file renamed
// onto name (atomicfile.Write), so that a symbolic link there is
// replaced, not written through.
func writeFile(name string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(name, data, 0o644, false)
}

// insideBeforeMkdir refuses the directory dir, to be made if missing,
// when the part of it that exists resolves outside the project root or is
// not a directory, before anything is made.
func insideBeforeMkdir(root, dir string) error {
	existing := dir
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		existing = parent
	}
	if err := inside(root, existing); err != nil {
		return err
	}
	if fi, err := os.Stat(existing); err != nil {
		return err
	} else if !fi.IsDir() {
		return fmt.Errorf("%s: not a directory; refused, nothing written", existing)
	}
	return nil
}

// inside refuses a directory whose real path (symbolic links resolved)
// is not inside the real path of the project directory root.
func inside(root, dir string) error {
	r, err := filepath.Abs(root)
	if err == nil {
		r, err = filepath.EvalSymlinks(r)
	}
	if err != nil {
		return err
	}
	d, err := filepath.Abs(dir)
	if err == nil {
		d, err = filepath.EvalSymlinks(d)
	}
	if err != nil {
		return err
	}
	if d != r && !strings.HasPrefix(d, r+string(filepath.Separator)) {
		return fmt.Errorf("%s resolves to %s, outside the project %s (a symbolic link); refused, nothing written", dir, d, r)
	}
	return nil
}
