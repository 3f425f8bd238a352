package cmd

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/ooziefake"
	"github.com/celos-go/celos/internal/testenv/hdfstest"
	"github.com/celos-go/celos/internal/testenv/sshtest"
)

// touchProject is a project with one Oozie workflow that waits for
// /in/HOUR/_READY on HDFS and writes /out/HOUR/_SUCCESS, and two cases
// with the input of 10:00 only: "ok" expects the output of 10:00, "late"
// that of 11:00 too (whose input never comes: the case must fail).
const touchProject = `package p

import "celos.dev/celos"

workflows: celos.#Workflows
tests:     celos.#Tests

workflows: touch: {
	schedule: celos.#Hourly
	trigger:  celos.#HdfsCheck & {path: "/in/${year}${month}${day}${hour}/_READY"}
	externalService: celos.#Oozie & {properties: {
		"oozie.wf.application.path": "${nameNode}/apps/p/touch"
		outputDir:                   "/out/${year}${month}${day}${hour}"
	}}
}

_case: {
	sampleTimeStart: "2026-01-01T10:00:00Z"
	sampleTimeEnd:   "2026-01-01T11:00:00Z"
	pathProperties: ["outputDir"]
	inputs: [{path: "/in", files: {"2026010110/_READY": ""}}]
}

tests: ok:   _case & {outputs: [{path: "/out", files: {"2026010110/_SUCCESS": ""}}]}
tests: late: _case & {outputs: [{path: "/out", files: {"2026010110/_SUCCESS": "", "2026010111/_SUCCESS": ""}}]}
`

// sftpTarget writes an installation under srv.Root, served by the real
// sshd: the target file, the Hadoop XML files (coreSite and an empty
// hdfs-site.xml) and the defaults directory with defaultsJSON ("": none),
// all sftp: URLs. It returns the target file's sftp: URL.
func sftpTarget(t *testing.T, srv *sshtest.Server, coreSite, defaultsJSON string) string {
	t.Helper()
	files := map[string]string{
		"etc/hadoop/core-site.xml": coreSite,
		"etc/hadoop/hdfs-site.xml": "<configuration/>\n",
		"celos/workflows/.keep":    "",
		"celos/defaults/.keep":     "",
		"target.json": fmt.Sprintf(`{"hadoop.core-site.xml": %q, "hadoop.hdfs-site.xml": %q,
 "workflows.dir.uri": %q, "defaults.dir.uri": %q, "hdfs.root": "/apps"}`,
			srv.URL(srv.Root+"/etc/hadoop/core-site.xml"), srv.URL(srv.Root+"/etc/hadoop/hdfs-site.xml"),
			srv.URL(srv.Root+"/celos/workflows"), srv.URL(srv.Root+"/celos/defaults")),
	}
	if defaultsJSON != "" {
		files["celos/defaults/defaults.json"] = defaultsJSON
	}
	writeTree(t, srv.Root, files)
	return srv.URL(srv.Root + "/target.json")
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sshEnv clears what would let a test reach keys and known_hosts files
// other than the ones it names.
func sshEnv(t *testing.T) {
	t.Setenv("SSH_AUTH_SOCK", "")
	t.Setenv("CELOS_KNOWN_HOSTS", "")
	t.Setenv("CELOS_SSH_IDENTITY", "")
	t.Setenv("CELOS_CI_USERNAME", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("CUE_REGISTRY", "none")
}

// TestTestAgainstSFTPTarget runs `celos test --target sftp://...` through
// the command line against an installation as production has one: the
// target file, its Hadoop configuration (the real HDFS mini cluster's
// core-site.xml) and its defaults directory's defaults.json (naming the
// Oozie and its properties) are read from a real OpenSSH server, with
// --known-hosts and --identity; the sandboxes are on the mini cluster,
// under the default /user/USER/.celos-test/PROJECT; the Oozie is the
// Oozie fake, which checks that the application's workflow.xml is on
// HDFS where the rewritten application path says (the project's hdfs/
// deployed under the case's prefix and the target's hdfs.root) and
// writes the job's output on HDFS where the rewritten outputDir says.
// One case passes; the other expects an hour whose input never comes and
// fails with the missing files and the waiting slot named. Nothing is
// left on HDFS. A second run takes the SSH settings from
// CELOS_KNOWN_HOSTS and CELOS_SSH_IDENTITY.
func TestTestAgainstSFTPTarget(t *testing.T) {
	c := hdfstest.StartT(t, hdfstest.Options{})
	srv := sshtest.Start(t, sshtest.Options{})
	fake, err := ooziefake.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	uri := "hdfs://" + c.Addr()
	hc := c.Client()
	fake.SetCheckApp(func(appPath string) error {
		p := strings.TrimPrefix(strings.ReplaceAll(appPath, "${nameNode}", uri), uri)
		_, err := hc.Stat(p + "/workflow.xml")
		return err
	})
	fake.SetPlan(func(conf map[string]string) []string {
		out := conf["outputDir"]
		if err := hc.MkdirAll(out, 0o755); err != nil {
			return []string{ooziefake.Failed}
		}
		w, err := hc.Create(out + "/_SUCCESS")
		if err == nil {
			err = w.Close()
		}
		if err != nil {
			return []string{ooziefake.Failed}
		}
		return []string{ooziefake.Running, ooziefake.Succeeded}
	})
	core, err := os.ReadFile(filepath.Join(c.ConfDir(), "core-site.xml"))
	if err != nil {
		t.Fatal(err)
	}
	target := sftpTarget(t, srv, string(core), fmt.Sprintf(`{"CELOS_DEFAULT_OOZIE": %q,
 "CELOS_DEFAULT_OOZIE_PROPERTIES": {"user.name": %q, "nameNode": %q}}`, fake.URL, c.User(), uri))
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"p.cue":                   touchProject,
		"hdfs/touch/workflow.xml": "<workflow-app name='${celosWorkflowName}'/>\n",
	})
	sshEnv(t)
	t.Setenv("HADOOP_USER_NAME", c.User())
	base := path.Join("/user", c.User(), ".celos-test", "p")

	var stdout, stderr bytes.Buffer
	code := run([]string{"test", dir, "--target", target, "--known-hosts", srv.KnownHostsPath, "--identity", srv.ClientKeyPath}, &stdout, &stderr)
	out := durationPatterns[0].re.ReplaceAllString(stdout.String(), "(N.NNs)")
	out = durationPatterns[1].re.ReplaceAllString(out, "\tN.NNNs\t")
	want := "--- FAIL: late (N.NNs)\n" +
		"    /out: 2026010111: expected a directory, missing from the output\n" +
		"    /out: 2026010111/_SUCCESS: expected a file (0 bytes), missing from the output\n" +
		"    slots that did not succeed:\n" +
		"        touch@2026-01-01T11:00:00.000Z WAITING\n" +
		"FAIL\n" +
		"FAIL\tp\tN.NNNs\t(1 of 2 cases failed)\n"
	if code != ExitFailure || stderr.Len() > 0 {
		t.Errorf("exit %d, want 1; stderr:\n%s", code, stderr.String())
	}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	// Every case's job ran on the target's Oozie with its paths under
	// that case's prefix, under the default base.
	jobs := fake.Jobs()
	if len(jobs) != 2 {
		t.Fatalf("%d Oozie jobs, want 2 (one per case, 10:00)", len(jobs))
	}
	prefixes := map[string]bool{}
	for _, j := range jobs {
		prefix, ok := strings.CutSuffix(j.Conf["outputDir"], "/out/2026010110")
		if !ok || !strings.HasPrefix(prefix, base+"/") {
			t.Errorf("outputDir %q is not under %s/<run>/<case>/out", j.Conf["outputDir"], base)
		}
		if app := j.Conf["oozie.wf.application.path"]; app != "${nameNode}"+prefix+"/apps/p/touch" {
			t.Errorf("application path %q, want ${nameNode}%s/apps/p/touch", app, prefix)
		}
		prefixes[prefix] = true
	}
	if len(prefixes) != 2 {
		t.Errorf("the cases shared a prefix: %v", prefixes)
	}
	assertEmptyOnHDFS(t, c, base)

	// The environment variables instead of the flags.
	t.Setenv("CELOS_KNOWN_HOSTS", srv.KnownHostsPath)
	t.Setenv("CELOS_SSH_IDENTITY", srv.ClientKeyPath)
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"test", dir, "--target", target, "--run", "^ok$"}, &stdout, &stderr); code != 0 || stderr.Len() > 0 {
		t.Errorf("with CELOS_KNOWN_HOSTS and CELOS_SSH_IDENTITY: exit %d, want 0; stdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "ok  \tp\t") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
	assertEmptyOnHDFS(t, c, base)
}

// assertEmptyOnHDFS fails the test if anything is under dir on the
// cluster (the run's directory included).
func assertEmptyOnHDFS(t *testing.T, c *hdfstest.Cluster, dir string) {
	t.Helper()
	left, err := c.Client().ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, fi := range left {
		t.Errorf("left on HDFS: %s/%s", dir, fi.Name())
	}
}

// TestTestTargetHostKeys: a target on an SSH server whose key is not in
// known_hosts, or whose key differs from the one known_hosts has, is
// refused before anything runs, saying what to check and how to add it.
func TestTestTargetHostKeys(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	impostor := sshtest.Start(t, sshtest.Options{})
	target := sftpTarget(t, srv, "<configuration/>\n", "")
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"p.cue": touchProject})
	sshEnv(t)
	empty := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The impostor's key under the real server's name.
	port := func(addr string) string { return addr[strings.LastIndex(addr, ":")+1:] }
	changed := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(changed, []byte(strings.Replace(impostor.KnownHostsLines()[0], port(impostor.Addr), port(srv.Addr), 1)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, knownHosts, want string
	}{
		{"unknown", empty, "celos: --target: read target file: unknown host key for [127.0.0.1]:" + port(srv.Addr) + " (ssh-ed25519 SHA256:"},
		{"changed", changed, "celos: --target: read target file: HOST KEY CHANGED for [127.0.0.1]:" + port(srv.Addr) + ": "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run([]string{"test", dir, "--target", target, "--known-hosts", tc.knownHosts, "--identity", srv.ClientKeyPath}, &stdout, &stderr)
			if code != ExitFailure || stdout.Len() > 0 {
				t.Errorf("exit %d, want 1; stdout (want nothing: no case runs):\n%s", code, stdout.String())
			}
			if !strings.HasPrefix(stderr.String(), tc.want) {
				t.Errorf("stderr:\n%s\nwant it to start with:\n%s", stderr.String(), tc.want)
			}
		})
	}
}
