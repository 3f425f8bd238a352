package deploy

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"

	fx "github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/schema/workflow"
	"github.com/celos-go/celos/targets"
	"github.com/celos-go/celos/targets/hadoopconf"
)

// snapshot is every file under the fixture's root (installation, project,
// and anything a test put beside them).
func snapshot(t *testing.T, f *fixture) map[string]string {
	t.Helper()
	return tree(t, f.root)
}

// mustBeIntact fails the test when anything under the fixture's root
// changed since before.
func mustBeIntact(t *testing.T, f *fixture, before map[string]string, what string) {
	t.Helper()
	if diff := cmp.Diff(before, snapshot(t, f)); diff != "" {
		t.Fatalf("%s changed the installation (-before +after):\n%s", what, diff)
	}
}

// writeTarget writes another target file for the fixture's installation
// (relative file: URLs resolve against f.root) and returns its URL.
func writeTarget(t *testing.T, f *fixture, name string, fields map[string]string) string {
	t.Helper()
	doc := map[string]string{
		"hadoop.core-site.xml": "file:installation/conf/core-site.xml",
		"hadoop.hdfs-site.xml": "file:installation/conf/hdfs-site.xml",
		"workflows.dir.uri":    "file:installation/workflows",
		"hdfs.root":            filepath.ToSlash(f.hdfsRoot),
	}
	for k, v := range fields {
		if v == "" {
			delete(doc, k)
		} else {
			doc[k] = v
		}
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, f.root, map[string]string{name: string(data)})
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Join(f.root, name))}).String()
}

// deployOther deploys a second project, "other", with the given workflow
// ids (and an hdfs/ directory) into the fixture's installation.
func deployOther(t *testing.T, f *fixture, ids ...string) {
	t.Helper()
	dir := filepath.Join(f.root, "other-project")
	writeFiles(t, filepath.Join(dir, "hdfs"), map[string]string{"workflow.xml": "<other/>"})
	o := f.options()
	o.DeployDir = dir
	o.Compile = func(string) (*workflow.Project, []string, error) { return project("other", ids...), nil, nil }
	if _, err := Deploy(context.Background(), o); err != nil {
		t.Fatalf("deploy the other project: %v", err)
	}
}

// TestManifestHDFSDirOnlyRootSlashName: the Oozie directory a manifest
// names is trusted only when it is exactly HDFS_ROOT/NAME after cleaning;
// a manifest naming /elsewhere/NAME (same last component), or an unclean
// spelling of another directory, never makes undeploy or deploy remove
// it.
func TestManifestHDFSDirOnlyRootSlashName(t *testing.T) {
	for _, tc := range []struct{ name, dir string }{
		{"elsewhere", "/elsewhere/wordcount"},
		{"sibling root", "/installation/hdfs2/wordcount"},
		{"dotdot", "/installation/hdfs/../victim/wordcount"},
	} {
		for _, cmd := range []string{"undeploy", "deploy without hdfs/"} {
			t.Run(tc.name+"/"+cmd, func(t *testing.T) {
				f := newFixture(t)
				ctx := context.Background()
				if _, err := Deploy(ctx, f.options()); err != nil {
					t.Fatal(err)
				}
				victim := filepath.Join(f.root, filepath.FromSlash(tc.dir))
				writeFiles(t, filepath.Join(f.root, "elsewhere", "wordcount"), map[string]string{"precious": "x"})
				writeFiles(t, filepath.Join(f.root, "installation", "hdfs2", "wordcount"), map[string]string{"precious": "x"})
				writeFiles(t, filepath.Join(f.root, "installation", "victim", "wordcount"), map[string]string{"precious": "x"})
				m := readManifestFile(t, f)
				m.HDFS.Dir = filepath.ToSlash(f.root) + tc.dir
				data, _ := json.Marshal(m)
				writeFiles(t, filepath.Join(f.wfDir, StateDir), map[string]string{"wordcount.manifest.json": string(data)})
				before := tree(t, victim)
				var warnings []string
				o := f.options()
				o.Project = "wordcount"
				o.Warn = func(s string) { warnings = append(warnings, s) }
				var err error
				if cmd == "undeploy" {
					_, err = Undeploy(ctx, o)
				} else {
					os.RemoveAll(filepath.Join(f.deployDir, "hdfs"))
					_, err = Deploy(ctx, o)
				}
				if err != nil {
					t.Fatal(err)
				}
				after := tree(t, victim)
				if diff := cmp.Diff(before, after); diff != "" {
					t.Fatalf("%s touched %s named by the manifest (-before +after):\n%s\nwarnings %q", cmd, tc.dir, diff, warnings)
				}
				if len(warnings) == 0 {
					t.Errorf("no warning about the manifest's directory")
				}
			})
		}
	}
}

// TestHDFSDirOverlapsWorkflowsDir: on a file:/// installation, an HDFS
// directory that is, contains or is inside the workflows or defaults
// directory is refused by deploy, plan and undeploy before anything is
// touched (celos init workflows deployed with --hdfs-root the parent of
// the workflows directory replaced that directory). Paths are compared
// cleaned and, on the local disk, resolved through symbolic links.
func TestHDFSDirOverlapsWorkflowsDir(t *testing.T) {
	type setup struct {
		project  string // project name
		hdfsRoot string // relative to f.root
		link     string // a symlink to create (relative to f.root) -> installation
	}
	for _, tc := range []struct {
		name string
		setup
	}{
		{"is the workflows dir", setup{project: "workflows", hdfsRoot: "installation"}},
		{"inside the workflows dir", setup{project: "wordcount", hdfsRoot: "installation/workflows"}},
		{"inside the state dir", setup{project: "wordcount", hdfsRoot: "installation/workflows/" + StateDir}},
		{"contains the workflows dir", setup{project: "installation", hdfsRoot: "."}},
		{"is the defaults dir", setup{project: "defaults", hdfsRoot: "installation"}},
		{"inside the defaults dir", setup{project: "wordcount", hdfsRoot: "installation/defaults"}},
		{"through a symlink", setup{project: "workflows", hdfsRoot: "alias", link: "alias"}},
	} {
		for _, cmd := range []string{"deploy", "plan", "undeploy"} {
			t.Run(tc.name+"/"+cmd, func(t *testing.T) {
				f := newFixture(t)
				ctx := context.Background()
				writeFiles(t, filepath.Join(f.root, "installation", "defaults"), map[string]string{"defaults.js": "// Celos defaults"})
				f.target = writeTarget(t, f, "target.json", map[string]string{"defaults.dir.uri": "file:installation/defaults"})
				deployOther(t, f, "other-a")
				if _, err := Deploy(ctx, f.options()); err != nil {
					t.Fatal(err)
				}
				if tc.link != "" {
					if err := os.Symlink(filepath.Join(f.root, "installation"), filepath.Join(f.root, tc.link)); err != nil {
						t.Fatal(err)
					}
				}
				before := snapshot(t, f)
				f.project = project(tc.project, tc.project+"-x")
				o := f.options()
				o.Project = tc.project
				o.HDFSRoot = filepath.ToSlash(filepath.Clean(filepath.Join(f.root, tc.hdfsRoot)))
				err := runCommand(ctx, cmd, o)
				if !errors.Is(err, ErrHDFSDirOverlaps) {
					t.Fatalf("%s: want ErrHDFSDirOverlaps, got %v", cmd, err)
				}
				if !strings.Contains(err.Error(), "/"+tc.project) {
					t.Errorf("the error does not name the HDFS directory: %v", err)
				}
				mustBeIntact(t, f, before, "a refused "+cmd)
			})
		}
	}
}

// TestMissingWorkflowsDirRefused: a workflows or defaults directory that
// does not exist (a typo in the target file: …/workflow for …/workflows)
// is refused by deploy, plan and undeploy, creating nothing; --create-dirs
// (Options.CreateDirs) creates them for a first install.
func TestMissingWorkflowsDirRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fields map[string]string
		dir    string
	}{
		{"workflows", map[string]string{"workflows.dir.uri": "file:installation/workflow"}, "installation/workflow"},
		{"defaults", map[string]string{"defaults.dir.uri": "file:installation/default"}, "installation/default"},
	} {
		for _, cmd := range []string{"deploy", "plan", "undeploy"} {
			t.Run(tc.name+"/"+cmd, func(t *testing.T) {
				f := newFixture(t)
				ctx := context.Background()
				if _, err := Deploy(ctx, f.options()); err != nil {
					t.Fatal(err)
				}
				before := snapshot(t, f)
				o := f.options()
				o.Target = writeTarget(t, f, "typo.json", tc.fields)
				before = snapshot(t, f)
				var err error
				switch cmd {
				case "deploy":
					_, err = Deploy(ctx, o)
				case "plan":
					_, err = MakePlan(ctx, o)
				case "undeploy":
					o.Project = "wordcount"
					_, err = Undeploy(ctx, o)
				}
				if !errors.Is(err, ErrMissingDir) || !strings.Contains(err.Error(), tc.dir) {
					t.Fatalf("%s with a missing %s directory: want ErrMissingDir naming %s, got %v", cmd, tc.name, tc.dir, err)
				}
				if cmd != "undeploy" && !strings.Contains(err.Error(), "--create-dirs") {
					t.Errorf("the error does not mention --create-dirs: %v", err)
				}
				mustBeIntact(t, f, before, "a refused "+cmd)
				if _, err := os.Stat(filepath.Join(f.root, tc.dir)); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("%s created %s", cmd, tc.dir)
				}
			})
		}
	}
	// --create-dirs: a first install.
	f := newFixture(t)
	o := f.options()
	o.Target = writeTarget(t, f, "first.json", map[string]string{"workflows.dir.uri": "file:new/workflows", "defaults.dir.uri": "file:new/defaults"})
	o.CreateDirs = true
	if _, err := Deploy(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"new/workflows/wordcount.json", "new/defaults"} {
		if _, err := os.Stat(filepath.Join(f.root, d)); err != nil {
			t.Errorf("--create-dirs: %v", err)
		}
	}
}

// TestHDFSDirOwnedByAnotherWorkflowsDir: the Oozie directory records which
// workflows directory deployed it; a deploy or undeploy through another
// workflows directory (a typo'd target created with --create-dirs, another
// installation sharing the HDFS root) neither swaps nor removes it.
func TestHDFSDirOwnedByAnotherWorkflowsDir(t *testing.T) {
	for _, cmd := range []string{"deploy", "plan", "undeploy", "deploy without hdfs/"} {
		t.Run(cmd, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			if _, err := Deploy(ctx, f.options()); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(f.root, "installation", "workflow"), 0o755); err != nil {
				t.Fatal(err)
			}
			o := f.options()
			o.Target = writeTarget(t, f, "typo.json", map[string]string{"workflows.dir.uri": "file:installation/workflow"})
			before := snapshot(t, f)
			var err error
			switch cmd {
			case "deploy":
				f.project = project("wordcount", "wordcount-v2")
				_, err = Deploy(ctx, o)
			case "deploy without hdfs/":
				// Its manifest (copied along) names the directory: the
				// stale clean-up must not remove it either.
				data, rerr := os.ReadFile(filepath.Join(f.wfDir, StateDir, "wordcount.manifest.json"))
				if rerr != nil {
					t.Fatal(rerr)
				}
				writeFiles(t, filepath.Join(f.root, "installation", "workflow", StateDir), map[string]string{"wordcount.manifest.json": string(data)})
				os.RemoveAll(filepath.Join(f.deployDir, "hdfs"))
				before = snapshot(t, f)
				_, err = Deploy(ctx, o)
			case "plan":
				_, err = MakePlan(ctx, o)
			case "undeploy":
				o.Project = "wordcount"
				_, err = Undeploy(ctx, o)
			}
			if cmd == "deploy without hdfs/" {
				// The new workflows file is written (no Oozie directory is
				// needed), but the other installation's directory stays.
				if err != nil {
					t.Fatal(err)
				}
				after := snapshot(t, f)
				for k := range after {
					if strings.HasPrefix(k, "installation/workflow/") {
						delete(after, k)
					}
				}
				for k := range before {
					if strings.HasPrefix(k, "installation/workflow/") {
						delete(before, k)
					}
				}
				if diff := cmp.Diff(before, after); diff != "" {
					t.Fatalf("deploy removed the other installation's Oozie directory (-before +after):\n%s", diff)
				}
				return
			}
			if !errors.Is(err, ErrOwnedElsewhere) {
				t.Fatalf("%s: want ErrOwnedElsewhere, got %v", cmd, err)
			}
			if !strings.Contains(err.Error(), "installation/workflows") || !strings.Contains(err.Error(), "hdfs/wordcount") {
				t.Errorf("the error does not name the owner and the directory: %v", err)
			}
			mustBeIntact(t, f, before, "a refused "+cmd)
		})
	}
}

// TestOwnerRecordUnreadable: an owner record that is not one (corrupt,
// or a directory) does not let anyone swap or remove the Oozie directory;
// the error names the record, never its content.
func TestOwnerRecordUnreadable(t *testing.T) {
	for _, tc := range []string{"corrupt", "directory"} {
		for _, cmd := range []string{"deploy", "undeploy"} {
			t.Run(tc+"/"+cmd, func(t *testing.T) {
				f := newFixture(t)
				ctx := context.Background()
				if _, err := Deploy(ctx, f.options()); err != nil {
					t.Fatal(err)
				}
				rec := filepath.Join(f.hdfsRoot, "wordcount", OwnerFile)
				os.Remove(rec)
				if tc == "corrupt" {
					writeFiles(t, filepath.Dir(rec), map[string]string{OwnerFile: "SECRET-CONTENT"})
				} else {
					writeFiles(t, rec, map[string]string{"x": "SECRET-CONTENT"})
				}
				before := snapshot(t, f)
				o := f.options()
				o.Project = "wordcount"
				var err error
				if cmd == "deploy" {
					_, err = Deploy(ctx, o)
				} else {
					_, err = Undeploy(ctx, o)
				}
				if !errors.Is(err, ErrOwnedElsewhere) || !strings.Contains(err.Error(), OwnerFile) || strings.Contains(err.Error(), "SECRET") {
					t.Fatalf("%s: want ErrOwnedElsewhere naming the record without its content, got %v", cmd, err)
				}
				mustBeIntact(t, f, before, "a refused "+cmd)
			})
		}
	}
}

// TestOwnerRecordLegacy: an Oozie directory deployed by an older celos (no
// owner record, a manifest without workflowsDir) is taken over by the next
// deploy through the workflows directory whose manifest names it, which
// then records itself as the owner.
func TestOwnerRecordLegacy(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := Deploy(ctx, f.options()); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(f.hdfsRoot, "wordcount", OwnerFile)); err != nil {
		t.Fatal(err)
	}
	m := readManifestFile(t, f)
	m.WorkflowsDir = ""
	data, _ := json.Marshal(m)
	writeFiles(t, filepath.Join(f.wfDir, StateDir), map[string]string{"wordcount.manifest.json": string(data)})
	if p, err := MakePlan(ctx, f.options()); err != nil || p.HasChanges() {
		t.Fatalf("plan of a legacy deployment: %+v %v", p, err)
	}
	if _, err := Deploy(ctx, f.options()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.hdfsRoot, "wordcount", OwnerFile)); err != nil {
		t.Fatalf("no owner record after a redeploy: %v", err)
	}
	if m := readManifestFile(t, f); m.WorkflowsDir == "" {
		t.Fatalf("manifest without workflowsDir after a redeploy: %+v", m)
	}
}

// TestWorkflowIDClash: plan and deploy refuse a workflow id that another
// project deployed in the same workflows directory owns, naming the id,
// the project and its file; a workflows file that cannot be read is not
// taken as "no clash" but refused, naming the file and never its content.
func TestWorkflowIDClash(t *testing.T) {
	for _, cmd := range []string{"deploy", "plan"} {
		t.Run(cmd, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			deployOther(t, f, "other-a", "wordcount-nyc")
			before := snapshot(t, f)
			var err error
			if cmd == "deploy" {
				_, err = Deploy(ctx, f.options())
			} else {
				_, err = MakePlan(ctx, f.options())
			}
			if !errors.Is(err, ErrIDClash) {
				t.Fatalf("%s: want ErrIDClash, got %v", cmd, err)
			}
			for _, want := range []string{`"wordcount-nyc"`, `"other"`, "installation/workflows/other.json"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error lacks %s: %v", want, err)
				}
			}
			mustBeIntact(t, f, before, "a refused "+cmd)
		})
	}
	t.Run("unreadable", func(t *testing.T) {
		f := newFixture(t)
		ctx := context.Background()
		writeFiles(t, f.wfDir, map[string]string{"broken.json": "SECRET-CONTENT {"})
		before := snapshot(t, f)
		_, err := Deploy(ctx, f.options())
		if !errors.Is(err, ErrIDClash) || !strings.Contains(err.Error(), "broken.json") || strings.Contains(err.Error(), "SECRET") {
			t.Fatalf("want a refusal naming broken.json without its content, got %v", err)
		}
		mustBeIntact(t, f, before, "a refused deploy")
	})
	t.Run("no clash", func(t *testing.T) {
		f := newFixture(t)
		ctx := context.Background()
		deployOther(t, f, "other-a")
		// Neither dot files, nor other extensions, nor directories, nor the
		// project's own file count; a FIFO named *.json is not opened.
		writeFiles(t, f.wfDir, map[string]string{
			".hidden.json":       `{"workflows":[{"id":"wordcount-nyc"}]}`,
			"notes.txt":          "wordcount-nyc",
			"dir.json/x":         "x",
			"wordcount.json":     `{"workflows":[{"id":"wordcount-nyc"}]}`,
			"wordcount.json.bak": `{"workflows":[{"id":"wordcount-nyc"}]}`,
		})
		if err := syscall.Mkfifo(filepath.Join(f.wfDir, "fifo.json"), 0o644); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := Deploy(ctx, f.options()); done <- err }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(2 * time.Minute): // a hang guard, not a timing assertion
			t.Fatal("deploy hangs on a FIFO in the workflows directory")
		}
	})
}

// TestHDFSTreeRefusesEscapes: a symbolic link in hdfs/ whose real path
// leaves the project is refused (the error names the link, never the
// content of its target), hdfs/ itself may not be such a link, links
// inside the project are followed, and the reserved owner record name is
// refused.
func TestHDFSTreeRefusesEscapes(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "shadow")
	writeFiles(t, outside, map[string]string{"shadow": "SECRET-CONTENT", "dir/x": "SECRET-CONTENT"})
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string // "" = accepted
	}{
		{"file link out", func(t *testing.T, dir string) { symlink(t, secret, filepath.Join(dir, "hdfs", "lib", "shadow")) }, "hdfs/lib/shadow"},
		{"relative link out", func(t *testing.T, dir string) {
			rel, _ := filepath.Rel(filepath.Join(dir, "hdfs"), secret)
			symlink(t, rel, filepath.Join(dir, "hdfs", "shadow"))
		}, "hdfs/shadow"},
		{"link to a link out", func(t *testing.T, dir string) {
			symlink(t, secret, filepath.Join(dir, "inner"))
			symlink(t, filepath.Join(dir, "inner"), filepath.Join(dir, "hdfs", "x.jar"))
		}, "hdfs/x.jar"},
		{"hdfs is a link out", func(t *testing.T, dir string) {
			os.RemoveAll(filepath.Join(dir, "hdfs"))
			symlink(t, filepath.Join(outside, "dir"), filepath.Join(dir, "hdfs"))
		}, "hdfs"},
		{"link inside the project", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"shared/common.jar": "common"})
			symlink(t, filepath.Join("..", "..", "shared", "common.jar"), filepath.Join(dir, "hdfs", "lib", "common.jar"))
		}, ""},
		{"reserved name", func(t *testing.T, dir string) {
			writeFiles(t, filepath.Join(dir, "hdfs"), map[string]string{OwnerFile: "{}"})
		}, OwnerFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "project")
			writeFiles(t, filepath.Join(dir, "hdfs"), map[string]string{"workflow.xml": "<w/>", "lib/a.jar": "a"})
			tc.setup(t, dir)
			lt, err := scanLocal(dir)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(lt.files) != 3 {
					t.Fatalf("files %+v", lt.files)
				}
				return
			}
			if !errors.Is(err, ErrUnsafeLocalFile) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "SECRET") {
				t.Fatalf("want ErrUnsafeLocalFile naming %s (without the target's content), got %v", tc.want, err)
			}
		})
	}
	// Through Deploy, nothing is touched.
	f := newFixture(t)
	if _, err := Deploy(context.Background(), f.options()); err != nil {
		t.Fatal(err)
	}
	symlink(t, secret, filepath.Join(f.deployDir, "hdfs", "shadow"))
	before := snapshot(t, f)
	if _, err := Deploy(context.Background(), f.options()); !errors.Is(err, ErrUnsafeLocalFile) {
		t.Fatalf("deploy: %v", err)
	}
	if _, err := MakePlan(context.Background(), f.options()); !errors.Is(err, ErrUnsafeLocalFile) {
		t.Fatalf("plan: %v", err)
	}
	mustBeIntact(t, f, before, "a refused deploy")
}

func symlink(t *testing.T, oldname, newname string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(newname), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(oldname, newname); err != nil {
		t.Fatal(err)
	}
}

// TestHDFSTreeFIFONeverOpened: a FIFO in hdfs/ (or a symlink to one, or a
// file replaced by one after the listing) is refused without being
// opened, so plan and deploy cannot hang on it.
func TestHDFSTreeFIFONeverOpened(t *testing.T) {
	within := func(t *testing.T, what string, fn func() error) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- fn() }()
		select {
		case err := <-done:
			return err
		case <-time.After(2 * time.Minute): // a hang guard, not a timing assertion
			t.Fatalf("%s hangs on a FIFO", what)
			return nil
		}
	}
	dir := filepath.Join(t.TempDir(), "project")
	writeFiles(t, filepath.Join(dir, "hdfs"), map[string]string{"workflow.xml": "<w/>", "lib/a.jar": "a"})
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	symlink(t, fifo, filepath.Join(dir, "hdfs", "lib", "pipe.jar"))
	if _, err := scanLocal(dir); !errors.Is(err, ErrUnsafeLocalFile) || !strings.Contains(err.Error(), "pipe.jar") {
		t.Fatalf("scan with a link to a FIFO: %v", err)
	}
	os.Remove(filepath.Join(dir, "hdfs", "lib", "pipe.jar"))
	lt, err := scanLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The file becomes a FIFO after the listing.
	jar := filepath.Join(dir, "hdfs", "lib", "a.jar")
	os.Remove(jar)
	if err := syscall.Mkfifo(jar, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := within(t, "hashLocal", func() error { _, err := hashLocal(lt.files[0].path); return err }); err == nil {
		t.Fatal("hashLocal read a FIFO")
	}
	err = within(t, "upload", func() error {
		_, err := upload(context.Background(), targets.Local{}, lt, uploadPlan{dest: filepath.ToSlash(filepath.Join(t.TempDir(), "dest"))}, 2, nil)
		return err
	})
	if !errors.Is(err, ErrUnsafeLocalFile) || !strings.Contains(err.Error(), "a.jar") {
		t.Fatalf("upload of a file replaced by a FIFO: %v", err)
	}
}

// TestAppPathChecked: plan warns, and deploy refuses unless
// AllowForeignAppPath, when a workflow's Oozie application path is not
// under HDFS_ROOT/NAME (where deploy puts hdfs/).
func TestAppPathChecked(t *testing.T) {
	oozie := func(id, app string) workflow.Workflow {
		w := newWorkflow(id)
		w.ExternalService = fx.Oozie(map[string]string{"oozie.wf.application.path": app})
		return w
	}
	f := newFixture(t)
	ctx := context.Background()
	root := filepath.ToSlash(f.hdfsRoot)
	f.project.Workflows = []workflow.Workflow{
		oozie("wordcount-lax", root+"/wordcount/workflow.xml"),
		oozie("wordcount-nyc", "/user/celos/app/wordcount/workflow.xml"),
	}
	var warnings []string
	o := f.options()
	o.Warn = func(s string) { warnings = append(warnings, s) }
	p, err := MakePlan(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "wordcount-nyc") || !strings.Contains(p.Warnings[0], "/user/celos/app/wordcount/workflow.xml") ||
		!strings.Contains(p.Warnings[0], root+"/wordcount") {
		t.Fatalf("plan warnings %q", p.Warnings)
	}
	before := snapshot(t, f)
	_, err = Deploy(ctx, f.options())
	if !errors.Is(err, ErrForeignAppPath) || !strings.Contains(err.Error(), "wordcount-nyc") || !strings.Contains(err.Error(), "--allow-foreign-app-path") {
		t.Fatalf("deploy: want ErrForeignAppPath, got %v", err)
	}
	mustBeIntact(t, f, before, "a refused deploy")
	o = f.options()
	o.AllowForeignAppPath = true
	warnings = nil
	o.Warn = func(s string) { warnings = append(warnings, s) }
	if _, err := Deploy(ctx, o); err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "wordcount-nyc") {
		t.Fatalf("warnings %q", warnings)
	}
}

func TestAppPathProblem(t *testing.T) {
	const dir = "/user/celos/app/wc"
	for _, tc := range []struct {
		app, fs string
		ok      bool
	}{
		{"/user/celos/app/wc/workflow.xml", "hdfs://nn:8020", true},
		{"/user/celos/app/wc", "hdfs://nn:8020", true},
		{"/user/celos/app/wc/", "hdfs://nn:8020", true},
		{"/user/celos/app/wc/sub/${year}/workflow.xml", "hdfs://nn:8020", true},
		{"hdfs://nn:8020/user/celos/app/wc/workflow.xml", "hdfs://nn:8020", true},
		{"hdfs://nn/user/celos/app/wc/workflow.xml", "hdfs://nn:8020", true},
		{"HDFS://NN:8020/user/celos/app/wc/workflow.xml", "hdfs://nn:8020", true},
		{"file:///user/celos/app/wc/workflow.xml", "file://", true},
		{"/user/celos/app/wc2/workflow.xml", "hdfs://nn:8020", false},
		{"/user/celos/app/wcx", "hdfs://nn:8020", false},
		{"/user/celos/app/wc/../other/workflow.xml", "hdfs://nn:8020", false},
		{"/user/celos/app/${name}/workflow.xml", "hdfs://nn:8020", false},
		{"/user/celos/${dir}/wc/workflow.xml", "hdfs://nn:8020", false},
		{"/user/celos/app/wc/${x}/../../other/workflow.xml", "hdfs://nn:8020", false},
		{"${nameNode}/user/celos/app/wc/workflow.xml", "hdfs://nn:8020", true},
		{"${nameNode}/user/celos/app/other/workflow.xml", "hdfs://nn:8020", false},
		{"${nameNode}${appDir}/workflow.xml", "hdfs://nn:8020", false},
		{"hdfs://other:8020/user/celos/app/wc/workflow.xml", "hdfs://nn:8020", false},
		{"hdfs://nn:9000/user/celos/app/wc/workflow.xml", "hdfs://nn:8020", false},
		{"hdfs://nn:8020/user/celos/app/wc/workflow.xml", "file://", false},
		{"user/celos/app/wc/workflow.xml", "hdfs://nn:8020", false},
		{"", "hdfs://nn:8020", false},
		{"s3a://bucket/user/celos/app/wc/workflow.xml", "hdfs://nn:8020", false},
	} {
		got := appPathProblem(tc.app, dir, tc.fs)
		if (got == "") != tc.ok {
			t.Errorf("appPathProblem(%q, %q): %q, want ok=%v", tc.app, tc.fs, got, tc.ok)
		}
	}
}

// FuzzAppPathProblem: the application-path check never panics, and a
// path it accepts really is under the directory: cleaned (and with its
// ${...} tokens and file-system prefix taken off) it starts with dir/ or
// is dir, and has no .. component.
func FuzzAppPathProblem(f *testing.F) {
	for _, s := range []string{
		"/user/celos/app/wc/workflow.xml", "/user/celos/app/wc", "hdfs://nn:8020/user/celos/app/wc/x",
		"${nameNode}/user/celos/app/wc/x", "/user/celos/app/wc/${year}/x", "/user/celos/app/wc/../x",
		"file:///user/celos/app/wc/x", "hdfs://nn/user/celos/app/wc/${x}/../..", "${a}${b}", "::", "hdfs://[::1]:8020/x",
	} {
		f.Add(s)
	}
	const dir = "/user/celos/app/wc"
	f.Fuzz(func(t *testing.T, app string) {
		for _, fsName := range []string{"hdfs://nn:8020", "file://", ""} {
			if appPathProblem(app, dir, fsName) != "" {
				continue
			}
			p := strings.TrimSpace(app)
			if strings.HasPrefix(p, "${") {
				p = p[strings.Index(p, "}")+1:]
			} else if i := strings.Index(p, "://"); i >= 0 {
				u, err := url.Parse(p)
				if err != nil {
					t.Fatalf("accepted an unparsable URL %q", app)
				}
				p = u.Path
			} else if strings.HasPrefix(strings.ToLower(p), "file:") {
				u, err := url.Parse(p)
				if err != nil {
					t.Fatalf("accepted an unparsable URL %q", app)
				}
				p = u.Path
			}
			if i := strings.Index(p, "${"); i >= 0 {
				p = p[:i]
			}
			for _, part := range strings.Split(p, "/") {
				if part == ".." {
					t.Fatalf("accepted %q (fs %q) with a .. component", app, fsName)
				}
			}
			c := filepath.ToSlash(filepath.Clean(p))
			if c != dir && !strings.HasPrefix(c, dir+"/") {
				t.Fatalf("accepted %q (fs %q): %q is not under %s", app, fsName, c, dir)
			}
		}
	})
}

// TestLocalFailureNotDelayedByConnect: the local side of a deploy runs
// while the SSH connection is made; when it fails (here a symbolic link
// to a FIFO in hdfs/), the deploy stops at once with that error, as when
// the listing came first, and does not wait for a server that accepts
// the connection but never answers (the handshake's own timeout is 30 s).
func TestLocalFailureNotDelayedByConnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accept and stay silent
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	f := newFixture(t)
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(f.root, "id_ed25519")
	if err := os.WriteFile(key, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	f.conn = targets.NewConnector(targets.SSHOptions{Identities: []string{key}, NoAgent: true, InsecureIgnoreHostKey: true}, hadoopconf.Options{})
	defer f.conn.Close()
	target := fmt.Sprintf(`{
  "hadoop.core-site.xml": "file:installation/conf/core-site.xml",
  "hadoop.hdfs-site.xml": "file:installation/conf/hdfs-site.xml",
  "workflows.dir.uri": "sftp://celos@%s/wf",
  "hdfs.root": "/h"
}`, ln.Addr())
	writeFiles(t, f.root, map[string]string{"target.json": target})
	fifo := filepath.Join(f.root, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	symlink(t, fifo, filepath.Join(f.deployDir, "hdfs", "lib", "pipe.jar"))
	done := make(chan error, 1)
	go func() {
		_, err := Deploy(context.Background(), f.options())
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(20 * time.Second): // below the handshake's 30 s
		t.Fatal("the local failure waited for the SSH handshake")
	}
	var se *StepError
	if !errors.As(err, &se) || se.Step != "compile" || !se.Intact || !errors.Is(err, ErrUnsafeLocalFile) || !strings.Contains(err.Error(), "pipe.jar") {
		t.Fatalf("deploy: %v", err)
	}
}

// TestHDFSTreeFileNames: a file name in hdfs/ with a control character
// (a newline could forge lines of the plan a reviewer reads in CI, an
// escape sequence recolour it) or that is not UTF-8 is refused, quoted,
// before anything is read or uploaded; spaces and other Unicode are fine.
func TestHDFSTreeFileNames(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
	}{
		{"newline", "a\nNo changes: wordcount is up to date", `hdfs/"a\nNo changes: wordcount is up to date": file names must not contain control characters`},
		{"escape", "lib/x\x1b[31m.jar", `hdfs/"lib/x\x1b[31m.jar": file names must not contain control characters`},
		{"tab", "a\tb", `hdfs/"a\tb": file names must not contain control characters`},
		{"delete", "a\x7fb", `hdfs/"a\x7fb": file names must not contain control characters`},
		{"C1 control", "a\u0085b", `hdfs/"a\u0085b": file names must not contain control characters`},
		{"not UTF-8", "bad\xff\xfe", `hdfs/"bad\xff\xfe": file names must be UTF-8`},
		{"space and Unicode", "lib/wörd count.jar", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "project")
			writeFiles(t, filepath.Join(dir, "hdfs"), map[string]string{"workflow.xml": "<w/>", tc.file: "x"})
			lt, err := scanLocal(dir)
			if tc.want == "" {
				if err != nil || len(lt.files) != 2 {
					t.Fatalf("scan: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrUnsafeLocalFile) {
				t.Fatalf("want ErrUnsafeLocalFile, got %v", err)
			}
			if got := strings.TrimPrefix(err.Error(), filepath.Dir(dir)+"/project/"); got != tc.want {
				t.Errorf("error\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestOwnerRecordMissingWarnedOnce: deploying over an Oozie directory that
// Celos CI left (no owner record, no manifest) warns once, not once per
// check of the directory (it said the same line twice).
func TestOwnerRecordMissingWarnedOnce(t *testing.T) {
	f := newFixture(t)
	writeFiles(t, filepath.Join(f.hdfsRoot, "wordcount"), map[string]string{"workflow.xml": "<celos-ci/>"})
	o := f.options()
	var warnings []string
	o.Warn = func(s string) { warnings = append(warnings, s) }
	if _, err := Deploy(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, w := range warnings {
		if strings.Contains(w, "has no celos owner record") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("warned %d times about the missing owner record, want once: %q", n, warnings)
	}
}
