package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
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
