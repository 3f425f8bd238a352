package cmd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/celos-go/celos/internal/testenv/hdfstest"
)

// TestTestOnHDFS runs `celos test --hdfs` against a real HDFS mini
// cluster: inputs are written under the prefix on HDFS, the hdfsCheck
// trigger asks HDFS, the job (a command running Hadoop's FsShell, as a
// command-service workflow would run `hdfs dfs`) copies the input to the
// output on HDFS, the output is read back and compared; a second case
// expecting other contents fails with a diff; nothing is left on HDFS.
func TestTestOnHDFS(t *testing.T) {
	c := hdfstest.StartT(t, hdfstest.Options{})
	java, jargs, err := hdfstest.Paths()
	if err != nil {
		t.Fatal(err)
	}
	// FsShell with the cluster's configuration: the main class of Paths
	// replaced, the configuration directory put on the classpath.
	var argv []string
	for i, a := range jargs[:len(jargs)-1] {
		if i > 0 && jargs[i-1] == "-cp" {
			a = c.ConfDir() + string(os.PathListSeparator) + a
		}
		argv = append(argv, a)
	}
	dir := t.TempDir()
	// An `hdfs dfs` of the cluster, as the job's command runs it.
	script := "#!/bin/sh\nexec " + fmt.Sprintf("%q", java)
	for _, a := range argv {
		script += fmt.Sprintf(" %q", a)
	}
	script += " org.apache.hadoop.fs.FsShell -fs \"$CELOS_TEST_FS\" \"$@\"\n"
	dfs := filepath.Join(t.TempDir(), "dfs")
	if err := os.WriteFile(dfs, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	project := `package p

import "celos.dev/celos"

workflows: celos.#Workflows
tests:     celos.#Tests

workflows: copy: {
	schedule: celos.#Hourly
	trigger:  celos.#HdfsCheck & {path: "/in/${hour}/_READY"}
	externalService: celos.#Command & {
		command: ["sh", "-c", "` + dfs + ` -mkdir -p $CELOS_HDFS_PREFIX/out/${hour} && ` + dfs + ` -cp $CELOS_HDFS_PREFIX/in/${hour}/data $CELOS_HDFS_PREFIX/out/${hour}/data"]
		env: HADOOP_USER_NAME: "` + c.User() + `"
	}
}

_hour: {
	sampleTimeStart: "2026-01-01T10:00:00Z"
	sampleTimeEnd:   "2026-01-01T10:30:00Z"
	inputs: [{path: "/in/10", files: {"_READY": "", "data": "ten\n"}}]
}

tests: ok: _hour & {outputs: [{path: "/out", files: {"10/data": "ten\n"}}]}
tests: wrong: _hour & {outputs: [{path: "/out", files: {"10/data": "TEN\n"}}]}
`
	if err := os.WriteFile(filepath.Join(dir, "p.cue"), []byte(project), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CUE_REGISTRY", "none")
	t.Setenv("HADOOP_USER_NAME", c.User())
	var stdout, stderr bytes.Buffer
	code := run([]string{"test", dir, "--hdfs", "hdfs://" + c.Addr(), "--hdfs-prefix", "/sandboxes"}, &stdout, &stderr)
	out := durationPatterns[0].re.ReplaceAllString(stdout.String(), "(N.NNs)")
	if code != ExitFailure || stderr.Len() > 0 {
		t.Errorf("exit %d, want 1; stderr:\n%s", code, stderr.String())
	}
	want := "--- FAIL: wrong (N.NNs)\n" +
		"    /out: 10/data: contents differ\n" +
		"        --- expected/10/data\n        +++ actual/10/data\n        @@ -1 +1 @@\n        -TEN\n        +ten\n" +
		"FAIL\n"
	if !strings.HasPrefix(out, want) || !strings.Contains(out, "(1 of 2 cases failed)") {
		t.Errorf("output:\n%s\nwant it to start with:\n%s", out, want)
	}
	left, err := c.Client().ReadDir("/sandboxes")
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("left on HDFS: /sandboxes/%s", left[0].Name())
	}
}
