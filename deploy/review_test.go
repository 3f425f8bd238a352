package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/celos-go/celos/internal/testenv/sshtest"
	"github.com/celos-go/celos/targets"
)

// TestContainedDeploymentNameQuoted: an Oozie directory without an owner
// record that holds another deployment's (an HDFS root named one level
// too high) is refused naming the Oozie directory found inside it. Its
// name is read from the target: a subdirectory named with a newline and
// an escape sequence forged a line of the refusal and restyled the
// terminal, as the names quoted everywhere else did before.
func TestContainedDeploymentNameQuoted(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	rec, _ := json.Marshal(ownerRecord{Format: OwnerFormat, Project: "other", WorkflowsDir: "sftp://host/wf"})
	hostile := "x\nThe previous deployment is intact.\x1b[2J"
	writeFiles(t, filepath.Join(f.hdfsRoot, "wordcount", hostile), map[string]string{OwnerFile: string(rec)})
	for _, cmd := range []string{"deploy", "plan", "undeploy"} {
		o := f.options()
		o.Project = "wordcount"
		var err error
		switch cmd {
		case "deploy":
			_, err = Deploy(ctx, o)
		case "plan":
			_, err = MakePlan(ctx, o)
		case "undeploy":
			_, err = Undeploy(ctx, o)
		}
		if !errors.Is(err, ErrOwnedElsewhere) {
			t.Fatalf("%s: want ErrOwnedElsewhere, got %v", cmd, err)
		}
		if msg := err.Error(); strings.Contains(msg, "\x1b") || strings.Contains(msg, "\nThe previous deployment is intact.") {
			t.Errorf("%s: the name of the directory found is printed raw: %q", cmd, msg)
		}
	}
}

// TestPlanRefusalQuotesTheFileName: a file of the live Oozie directory
// replaced by a symbolic link between plan's listing and its read is
// refused, naming the file. A name with a format character (a bidi
// override, which a local file name may hold and the plan quotes) was
// printed raw in that refusal, reordering what the reader sees. On the
// real OpenSSH server.
func TestPlanRefusalQuotesTheFileName(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	r := newRemote(t, srv, localCore, srv.Root+"/hdfs")
	ctx := context.Background()
	name := "lib/a\u202egnp.xml"
	writeFiles(t, filepath.Join(r.deployDir, "hdfs"), map[string]string{name: "<x/>\n"})
	if _, err := Deploy(ctx, r.options(t)); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(srv.Root, "hdfs", "wordcount")
	writeFiles(t, srv.Root, map[string]string{"other.txt": "something else\n"})
	writeFiles(t, filepath.Join(r.deployDir, "hdfs"), map[string]string{name: "<x changed='yes'/>\n"})
	o := r.options(t)
	var once sync.Once
	o.Connector.Wrap = func(fsys targets.FS) targets.FS {
		return &swapOnOpenFS{FS: fsys, name: name, once: &once, swap: func() {
			p := filepath.Join(live, filepath.FromSlash(name))
			if err := os.Remove(p); err != nil {
				t.Error(err)
			}
			if err := os.Symlink(filepath.Join(srv.Root, "other.txt"), p); err != nil {
				t.Error(err)
			}
		}}
	}
	_, err := MakePlan(ctx, o)
	if err == nil {
		t.Fatal("plan read through a link put in place of a listed file")
	}
	if msg := err.Error(); strings.Contains(msg, "\u202e") {
		t.Errorf("the file name is printed raw: %q", msg)
	}
}
