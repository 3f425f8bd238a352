package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/celos-go/celos/deploy"
)

// TestDeployExitCodes: plan and deploy --dry-run exit 0 for no change, 2
// for changes and 1 for any error (usage errors too), so CI can gate on
// them; deploy and undeploy keep the usual 0/1/2.
func TestDeployExitCodes(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"target.json":        `{"hadoop.core-site.xml": "file:conf/core-site.xml", "hadoop.hdfs-site.xml": "file:conf/hdfs-site.xml", "workflows.dir.uri": "file:workflows", "hdfs.root": "` + filepath.ToSlash(filepath.Join(dir, "hdfs")) + `"}`,
		"conf/core-site.xml": `<configuration><property><name>fs.defaultFS</name><value>file:///</value></property></configuration>`,
		"conf/hdfs-site.xml": `<configuration/>`,
		"project/project.cue": `package tiny

import "celos.dev/celos"

project: "tiny"
workflows: celos.#Workflows
workflows: hello: {
	schedule:        celos.#Hourly
	trigger:         celos.#Always
	externalService: celos.#Command & {command: ["echo", "hello"]}
}
`,
		"project/hdfs/workflow.xml": "<workflow-app/>\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// An installed server's workflows directory exists.
	if err := os.MkdirAll(filepath.Join(dir, "workflows"), 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "target.json")
	project := filepath.Join(dir, "project")
	code := func(args ...string) int {
		var out, errOut bytes.Buffer
		c := run(args, &out, &errOut)
		t.Logf("celos %v: exit %d\n%s%s", args, c, out.String(), errOut.String())
		return c
	}
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"plan", "--target", target, "--deploy-dir", project}, ExitChanges},
		{[]string{"deploy", "--dry-run", "--target", target, "--deploy-dir", project}, ExitChanges},
		{[]string{"plan", "--target", filepath.Join(dir, "missing.json"), "--deploy-dir", project}, ExitFailure},
		{[]string{"plan", "--bogus-flag"}, ExitFailure},
		{[]string{"plan"}, ExitFailure},
		{[]string{"deploy", "--dry-run", "--bogus-flag"}, ExitFailure},
		{[]string{"deploy", "--bogus-flag"}, ExitUsage},
		{[]string{"deploy", "--dry-run", "--target", target, project}, ExitFailure},
		{[]string{"deploy", "--target", target, project}, ExitUsage},
		{[]string{"deploy", "--dry-run", "--parallel", "0", "--target", target, "--deploy-dir", project}, ExitFailure},
		{[]string{"deploy", "--parallel", "-1", "--target", target, "--deploy-dir", project}, ExitUsage},
		{[]string{"deploy", "--deploy-dir", project}, ExitUsage},
		{[]string{"undeploy", "--target", target}, ExitUsage},
		{[]string{"deploy", "--target", target, "--deploy-dir", project}, ExitOK},
		{[]string{"plan", "--target", target, "--deploy-dir", project}, ExitNoChanges},
		{[]string{"deploy", "--dry-run", "--target", target, "--deploy-dir", project}, ExitNoChanges},
		{[]string{"deploy", "--target", target, "--deploy-dir", filepath.Join(dir, "nonexistent")}, ExitFailure},
		{[]string{"undeploy", "--target", target, "--project", "tiny"}, ExitOK},
		{[]string{"plan", "--target", target, "--deploy-dir", project}, ExitChanges},
		{[]string{"undeploy", "--target", target, "--project", "tiny"}, ExitFailure},
		{[]string{"undeploy", "--target", target, "--project", "tiny", "--missing-ok"}, ExitOK},
		{[]string{"deploy", "--target", target, "--deploy-dir", project}, ExitOK},
		{[]string{"undeploy", "--target", target, "--deploy-dir", project}, ExitOK},
		{[]string{"undeploy", "--target", target, "--deploy-dir", filepath.Join(dir, "nonexistent")}, ExitUsage},
	} {
		if got := code(tc.args...); got != tc.want {
			t.Errorf("celos %v: exit %d, want %d", tc.args, got, tc.want)
		}
	}
}

// TestProgressLine: on a terminal the step and the upload progress share
// one line, redrawn in place, and are cleared before the summary.
func TestProgressLine(t *testing.T) {
	var b bytes.Buffer
	p := &progressLine{w: &b}
	p.step("upload HDFS directory")
	p.progress(deploy.Progress{Files: 512, TotalFiles: 1001, Bytes: 52_300_000, TotalBytes: 107_400_000})
	p.clear()
	want := "\r\033[Kupload HDFS directory..." +
		"\r\033[Kupload HDFS directory: 512/1001 files, 52.3 MB/107.4 MB" +
		"\r\033[K"
	if got := b.String(); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if isTerminal(&b) {
		t.Fatal("a buffer is not a terminal")
	}
}
