package deploy

// The second adversarial sweep of the deploy path (November 2026):
// incremental deploys, the lock, plan and undeploy against hostile or
// hand-modified targets. See docs/reliability.md, "Deploy sweep, round
// two".

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/sshtest"
)

// TestOverlapThroughServerSymlinkOpenSSH: on the real OpenSSH server, the
// workflows directory is reached through a symbolic link (a home
// directory /home/celos that links to /srv/celos), and the HDFS side is
// the server's disk (fs.defaultFS file:///) with the HDFS root the real
// directory. A project named workflows has HDFS_ROOT/NAME = the workflows
// directory's real path: deploy swapped it aside and removed it with
// every project's workflows file, and undeploy removed it. Both must be
// refused, as on the local disk, with nothing changed.
func TestOverlapThroughServerSymlinkOpenSSH(t *testing.T) {
	for _, cmd := range []string{"deploy", "plan", "undeploy"} {
		t.Run(cmd, func(t *testing.T) {
			srv := sshtest.Start(t, sshtest.Options{})
			real := filepath.Join(srv.Root, "srv")
			home := filepath.Join(srv.Root, "home")
			if err := os.MkdirAll(real, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, home); err != nil {
				t.Fatal(err)
			}
			// The installation as the target file names it: through the link.
			r := newRemoteIn(t, srv, home, localCore, filepath.Join(real, "celos"))
			writeFiles(t, r.wfDir, map[string]string{"other.json": `{"project":"other","workflows":[]}`})
			before := tree(t, real)
			o := r.options(t)
			o.Project = "workflows"
			r.project = project("workflows", "workflows-x")
			var err error
			switch cmd {
			case "deploy":
				_, err = Deploy(context.Background(), o)
			case "plan":
				_, err = MakePlan(context.Background(), o)
			case "undeploy":
				_, err = Undeploy(context.Background(), o)
			}
			if !errors.Is(err, ErrHDFSDirOverlaps) {
				t.Errorf("%s: want ErrHDFSDirOverlaps, got %v", cmd, err)
			}
			if diff := cmp.Diff(before, tree(t, real)); diff != "" {
				t.Fatalf("%s changed the installation (-before +after):\n%s", cmd, diff)
			}
		})
	}
}
