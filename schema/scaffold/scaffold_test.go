package scaffold

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/celos-go/celos/deploy"
	"github.com/celos-go/celos/scheduler/sandbox"
	"github.com/celos-go/celos/schema"
	"github.com/celos-go/celos/schema/workflow"
	"github.com/google/go-cmp/cmp"
)

// findCUE locates the cue CLI: $(go env GOPATH)/bin/cue, else the PATH.
func findCUE(t *testing.T) string {
	t.Helper()
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, p := range filepath.SplitList(strings.TrimSpace(string(out))) {
			c := filepath.Join(p, "bin", "cue")
			if _, err := os.Stat(c); err == nil {
				return c
			}
		}
	}
	if c, err := exec.LookPath("cue"); err == nil {
		return c
	}
	t.Fatal("the cue CLI is not installed; it is needed to check that plain `cue vet` works on a scaffolded project. " +
		"Install it with scripts/test-deps.sh, or: go install cuelang.org/go/cmd/cue@v0.17.1")
	return ""
}

// TestScaffoldCompiles writes a project and compiles it: valid, without a
// warning, and as in testdata/golden/scaffold.json.
func TestScaffoldCompiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wordcount")
	files, err := Write(dir, Options{Rev: "v1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"workflows.cue", "hdfs/workflow.xml", "cue.mod/module.cue", "cue.mod/pkg/celos.dev/celos/trigger.cue",
		".pre-commit-config.yaml", ".github/workflows/deploy.yml", "Jenkinsfile", "README.md"} {
		if !contains(files, want) {
			t.Errorf("scaffold lacks %s (has %v)", want, files)
		}
	}
	p, diags, err := schema.Compile(dir)
	if err != nil || len(diags) > 0 {
		t.Fatalf("scaffold does not compile cleanly: %v %v", diags, err)
	}
	got, _ := p.Marshal()
	golden := filepath.Join("..", "..", "testdata", "golden", "scaffold.json")
	if os.Getenv("CELOS_UPDATE_GOLDEN") != "" {
		os.WriteFile(golden, got, 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (CELOS_UPDATE_GOLDEN=1 writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("scaffold compiles to something else than %s (CELOS_UPDATE_GOLDEN=1 rewrites it):\n%s", golden, got)
	}
	deploy, _ := os.ReadFile(filepath.Join(dir, ".github", "workflows", "deploy.yml"))
	for _, want := range []string{"branches: [main]", `celos deploy --target "$PRODUCTION_TARGET" --project wordcount`, "cmd/celos@v1.2.3"} {
		if !bytes.Contains(deploy, []byte(want)) {
			t.Errorf("deploy.yml lacks %q:\n%s", want, deploy)
		}
	}
	pc, _ := os.ReadFile(filepath.Join(dir, ".pre-commit-config.yaml"))
	if !bytes.Contains(pc, []byte("id: celos-vet")) || !bytes.Contains(pc, []byte("rev: v1.2.3")) {
		t.Errorf(".pre-commit-config.yaml:\n%s", pc)
	}
}

// TestScaffoldPlainCUE checks that plain `cue vet -c ./...` (and `cue
// export`) pass on a scaffolded project offline, with the real cue CLI.
func TestScaffoldPlainCUE(t *testing.T) {
	cue := findCUE(t)
	dir := filepath.Join(t.TempDir(), "wordcount")
	if _, err := Write(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	env := append(os.Environ(), "CUE_REGISTRY=none", "HOME="+home, "CUE_CACHE_DIR="+filepath.Join(home, "cache"), "CUE_CONFIG_DIR="+filepath.Join(home, "config"))
	for _, args := range [][]string{{"vet", "-c", "./..."}, {"export", "."}} {
		cmd := exec.Command(cue, args...)
		cmd.Dir = dir
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("cue %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// And plain cue catches a mistake too (closed definitions).
	wf := filepath.Join(dir, "workflows.cue")
	src, _ := os.ReadFile(wf)
	bad := strings.Replace(string(src), "schedule: celos.#Hourly", "schedule: celos.#Hourly\n\t\tmaxRetries: 3", 1)
	if err := os.WriteFile(wf, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cue, "vet", "-c", "./...")
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "maxRetries: field not allowed") {
		t.Errorf("cue vet of a misspelt field: err=%v\n%s", err, out)
	}
}

func TestScaffoldRefusesNonEmpty(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("mine"), 0o644)
	if _, err := Write(dir, Options{Name: "p"}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("Write into a non-empty directory: %v", err)
	}
	if _, err := Write(dir, Options{Name: "p", Force: true}); err != nil {
		t.Fatalf("Write --force: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "keep.txt")); string(data) != "mine" {
		t.Error("--force touched a file that is not the scaffold's")
	}
	if _, err := Write(filepath.Join(dir, "keep.txt"), Options{Name: "p"}); err == nil {
		t.Error("Write onto a file succeeded")
	}
	if _, err := Write(filepath.Join(t.TempDir(), "x"), Options{Name: "bad name"}); err == nil {
		t.Error("Write with an invalid name succeeded")
	}
}

func TestScaffoldNames(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "2-reports.daily")
	if _, err := Write(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	p, _, err := schema.Compile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p.Project != "2-reports.daily" {
		t.Errorf("project = %q", p.Project)
	}
	src, _ := os.ReadFile(filepath.Join(dir, "workflows.cue"))
	if !bytes.Contains(src, []byte("package p2_reports_daily")) {
		t.Errorf("package clause:\n%s", src[:200])
	}
}

// TestScaffoldAwkwardNames: every project name celos deploy accepts gives
// a project that compiles, named so; before, a CUE keyword (for, null)
// made an invalid package clause and a leading or trailing '_' or '-' an
// invalid module path (and vet said only ".: "). A name deploy refuses
// (a leading dot, "..", longer than 200 bytes) is refused at once, with
// deploy's reason.
func TestScaffoldAwkwardNames(t *testing.T) {
	for _, name := range []string{"for", "null", "func", "if", "_x", "x_", "x-", "-x", "x.", "a__b", "_"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "p")
			if _, err := Write(dir, Options{Name: name}); err != nil {
				t.Fatal(err)
			}
			p, diags, err := schema.Compile(dir)
			if err != nil || len(diags) > 0 {
				t.Fatalf("scaffold %q does not compile cleanly: %v %v", name, diags, err)
			}
			if p.Project != name {
				t.Errorf("project = %q", p.Project)
			}
		})
	}
	for name, want := range map[string]string{
		".hidden":                `project name ".hidden" starts with a dot`,
		"a..b":                   `project name "a..b" contains ".."`,
		strings.Repeat("a", 201): "is longer than 200 bytes",
	} {
		_, err := Write(filepath.Join(t.TempDir(), "p"), Options{Name: name})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Write %q: %v, want an error containing %q", name, err, want)
		}
		if deploy.ValidateProjectName(name) == nil {
			t.Errorf("deploy accepts %q", name)
		}
	}
}

// TestUpdateSchema: a vendored copy that differs gives a warning, and
// UpdateSchema makes it the built-in schema again.
func TestUpdateSchema(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p")
	if _, err := Write(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	vendor := filepath.Join(dir, filepath.FromSlash(schema.SchemaVendorDir))
	os.WriteFile(filepath.Join(vendor, "old.cue"), []byte("package celos\n"), 0o644)
	os.WriteFile(filepath.Join(vendor, "trigger.cue"), []byte("package celos\n"), 0o644)
	_, diags, err := schema.Compile(dir)
	if err != nil || len(diags) != 1 || !diags[0].Warning || !strings.Contains(diags[0].Msg, "vendored schema differs") {
		t.Fatalf("Compile with a stale vendored schema: %v %v", diags, err)
	}
	if _, err := UpdateSchema(dir); err != nil {
		t.Fatal(err)
	}
	if _, diags, err := schema.Compile(dir); err != nil || len(diags) != 0 {
		t.Fatalf("after UpdateSchema: %v %v", diags, err)
	}
	if _, err := os.Stat(filepath.Join(vendor, "old.cue")); !os.IsNotExist(err) {
		t.Error("UpdateSchema left old.cue")
	}
}

// TestUpdateSchemaNeedsModule: --update-schema of a directory that is not
// a project's module root creates nothing.
func TestUpdateSchemaNeedsModule(t *testing.T) {
	base := t.TempDir()
	plain := filepath.Join(base, "plain")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(base, "missing"), plain} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			files, err := UpdateSchema(dir)
			if !errors.Is(err, ErrNoModule) || len(files) != 0 {
				t.Fatalf("UpdateSchema(%s) = %v, %v; want ErrNoModule", dir, files, err)
			}
			if _, err := os.Stat(filepath.Join(dir, "cue.mod")); !os.IsNotExist(err) {
				t.Errorf("UpdateSchema created %s/cue.mod", dir)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(base, "missing")); !os.IsNotExist(err) {
		t.Errorf("UpdateSchema created the missing directory")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestScaffoldAppPathIsWhereDeployPutsIt: the scaffold's Oozie application
// paths are under DefaultHDFSRoot/NAME, where celos deploy uploads hdfs/
// (with the default HDFS root), for any project name; deploy's own check
// (which makes plan warn and deploy refuse) accepts them.
func TestScaffoldAppPathIsWhereDeployPutsIt(t *testing.T) {
	for _, name := range []string{"wordcount", "reports"} {
		dir := filepath.Join(t.TempDir(), "p")
		if _, err := Write(dir, Options{Name: name}); err != nil {
			t.Fatal(err)
		}
		p, _, err := schema.Compile(dir)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, w := range p.Workflows {
			if w.ExternalService.Type == workflow.ServiceOozie {
				n++
			}
		}
		if n == 0 {
			t.Fatal("the scaffold has no Oozie workflow to check")
		}
		if problems := deploy.AppPathProblems(p, deploy.DefaultHDFSRoot+"/"+name, ""); len(problems) > 0 {
			t.Errorf("%s: %q", name, problems)
		}
		if problems := deploy.AppPathProblems(p, "/apps/celos/"+name, ""); len(problems) != n {
			t.Errorf("%s: another HDFS root: %d problems, want %d", name, len(problems), n)
		}
	}
}

// TestScaffoldCI checks the CI files against what docs/deploy.md
// recommends: on pull requests vet, test, then plan; deploy on push to
// main; one run at a time; celos installed at the version that wrote the
// files (a development build says to pin a release instead).
func TestScaffoldCI(t *testing.T) {
	read := func(dir, name string) string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	inOrder := func(name, text string, parts ...string) {
		t.Helper()
		at := 0
		for _, p := range parts {
			i := strings.Index(text[at:], p)
			if i < 0 {
				t.Errorf("%s: %q missing, or not after %q:\n%s", name, p, parts, text)
				return
			}
			at += i + len(p)
		}
	}
	dir := filepath.Join(t.TempDir(), "wc")
	if _, err := Write(dir, Options{Rev: "v1.4.0"}); err != nil {
		t.Fatal(err)
	}
	gha := read(dir, ".github/workflows/deploy.yml")
	inOrder("deploy.yml", gha, "pull_request:", "concurrency: deploy-production", "cmd/celos@v1.4.0", "run: celos vet",
		"run: celos test --junit celos-test.xml", "if: github.event_name == 'pull_request'", `celos plan --target "$PRODUCTION_TARGET" --project wc || [ $? -eq 2 ]`,
		"if: github.event_name == 'push'", `celos deploy --target "$PRODUCTION_TARGET" --project wc`)
	if strings.Contains(gha, "@main") || strings.Contains(gha, "development build") {
		t.Errorf("deploy.yml is not pinned:\n%s", gha)
	}
	jf := read(dir, "Jenkinsfile")
	inOrder("Jenkinsfile", jf, "cmd/celos@v1.4.0", "disableConcurrentBuilds()", "sh 'celos vet'", "sh 'celos test --junit celos-test.xml'",
		"junit testResults: 'celos-test.xml'", "when { changeRequest() }", "celos plan --target", "when { branch 'main' }", "celos deploy --target")
	if pc := read(dir, ".pre-commit-config.yaml"); !strings.Contains(pc, "    rev: v1.4.0\n") || strings.Contains(pc, "rev: main") {
		t.Errorf(".pre-commit-config.yaml is not pinned:\n%s", pc)
	}
	// A development build cannot be pinned: main, and a comment saying so.
	dev := filepath.Join(t.TempDir(), "wc")
	if _, err := Write(dev, Options{Rev: "devel"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{".github/workflows/deploy.yml", ".pre-commit-config.yaml", "Jenkinsfile"} {
		if text := read(dev, name); !strings.Contains(text, "a development build") || !strings.Contains(text, "main") {
			t.Errorf("%s of a development build does not say to pin a release:\n%s", name, text)
		}
	}
}

// TestScaffoldTestCasePasses runs the scaffold's test case as `celos
// test` does (on the local disk, the stand-in in place of Oozie): it
// passes; with one expected count changed it fails with the diff.
func TestScaffoldTestCasePasses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wordcount")
	if _, err := Write(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	runIt := func() sandbox.Result {
		t.Helper()
		p, suite, _, err := schema.CompileWithTests(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(suite.Cases) != 1 {
			t.Fatalf("%d test cases, want 1", len(suite.Cases))
		}
		res, err := sandbox.Run(context.Background(), sandbox.Options{Project: p, Dir: dir, HDFSDir: filepath.Join(dir, "hdfs"), TempDir: t.TempDir()}, suite.Cases)
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	if r := runIt(); !r.Passed {
		t.Fatalf("the scaffold's test case fails: %q", r.Failures)
	}
	exp := filepath.Join(dir, "test", "wordcount-nyc", "output", "1100", "part-r-00000")
	if err := os.WriteFile(exp, []byte("end\t1\nthe\t2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runIt()
	if r.Passed || len(r.Failures) == 0 || !strings.Contains(r.Failures[0], "1100/part-r-00000: contents differ") || !strings.Contains(r.Failures[0], "-the\t2\n    +the\t1") {
		t.Errorf("a wrong expected count: %q", r.Failures)
	}
}

// TestUpdateSchemaStaysInProject: a vendored schema directory that is a
// symbolic link out of the project (a cloned repository can hold one) is
// refused, and nothing outside is written or removed; before,
// `celos init --update-schema` deleted the .cue files of the directory it
// pointed to and wrote the schema there. A scaffold file that is a
// symbolic link (celos init --force) is replaced, not written through.
func TestUpdateSchemaStaysInProject(t *testing.T) {
	root := t.TempDir()
	victim := filepath.Join(root, "victim")
	os.MkdirAll(victim, 0o755)
	os.WriteFile(filepath.Join(victim, "mine.cue"), []byte("package important\n"), 0o644)
	dir := filepath.Join(root, "p")
	if _, err := Write(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	vendor := filepath.Join(dir, filepath.FromSlash(schema.SchemaVendorDir))
	os.RemoveAll(vendor)
	if err := os.Symlink(victim, vendor); err != nil {
		t.Fatal(err)
	}
	if _, err := UpdateSchema(dir); err == nil || !strings.Contains(err.Error(), "outside the project") {
		t.Errorf("UpdateSchema through a link out of the project: %v", err)
	}
	if entries, _ := os.ReadDir(victim); len(entries) != 1 || entries[0].Name() != "mine.cue" {
		t.Errorf("the directory outside was changed: %v", entries)
	}
	// A project named by a relative path, its schema where it belongs.
	t.Chdir(root)
	if _, err := Write("rel", Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := UpdateSchema("rel"); err != nil {
		t.Errorf("UpdateSchema of a relative directory: %v", err)
	}

	// celos init --force over a scaffold file that links out.
	outside := filepath.Join(root, "bashrc")
	os.WriteFile(outside, []byte("mine\n"), 0o644)
	dir2 := filepath.Join(root, "p2")
	os.MkdirAll(dir2, 0o755)
	if err := os.Symlink(outside, filepath.Join(dir2, "README.md")); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(dir2, Options{Force: true}); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(outside); string(data) != "mine\n" {
		t.Errorf("init --force wrote through a symbolic link: %q", data)
	}
	if fi, err := os.Lstat(filepath.Join(dir2, "README.md")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("README.md is not a regular file of the scaffold: %v %v", fi, err)
	}
}

// TestWriteRefusesALinkOutBeforeWriting: celos init --force into a
// project whose directory of the scaffold (test/, hdfs/, .github/,
// cue.mod/pkg/) is a symbolic link out of it is refused before anything
// is written or created, inside the project or out. Before, the files
// that came first in name order were written, and the directories up to
// the link's were made in the directory outside, under an error that
// said "nothing written".
func TestWriteRefusesALinkOutBeforeWriting(t *testing.T) {
	for _, link := range []string{"test", "hdfs", ".github", "cue.mod/pkg", "test/wordcount-nyc/input"} {
		t.Run(link, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "p")
			outside := filepath.Join(root, "outside")
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, link)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(dir, link)); err != nil {
				t.Fatal(err)
			}
			before := tree(t, dir)
			_, err := Write(dir, Options{Force: true})
			if err == nil || !strings.Contains(err.Error(), "outside the project") {
				t.Fatalf("Write = %v, want a refusal", err)
			}
			if d := cmp.Diff(before, tree(t, dir)); d != "" {
				t.Errorf("the project changed (-before +after):\n%s", d)
			}
			if got := tree(t, outside); len(got) != 0 {
				t.Errorf("made outside the project: %v", got)
			}
		})
	}
}

// tree lists the paths under dir (not following links).
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
