package hdfstest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"
	"github.com/colinmarc/hdfs/v2/hadoopconf"

	"github.com/celos-go/celos/internal/testenv/hdfstest"
)

func TestMain(m *testing.M) { hdfstest.Main(m) }

func readFile(t *testing.T, fs *hdfs.Client, name string) string {
	t.Helper()
	b, err := fs.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSmoke proves the cluster is a real HDFS: a directory tree is written,
// listed, renamed, read back and deleted with colinmarc/hdfs.
func TestSmoke(t *testing.T) {
	c := hdfstest.Shared(t)
	fs := c.Client()
	root := "/" + t.Name()
	if err := fs.MkdirAll(root+"/tree/lib", 0o755); err != nil {
		t.Fatal(err)
	}
	hdfstest.WriteFile(t, fs, root+"/tree/workflow.xml", "<workflow-app/>")
	hdfstest.WriteFile(t, fs, root+"/tree/lib/a.jar", "jar bytes")
	big := make([]byte, 3<<20+17) // spans four 1 MiB blocks
	for i := range big {
		big[i] = byte(i * 7)
	}
	hdfstest.WriteFile(t, fs, root+"/tree/lib/big.bin", string(big))

	infos, err := fs.ReadDir(root + "/tree")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fi := range infos {
		names = append(names, fi.Name())
	}
	sort.Strings(names)
	if fmt.Sprint(names) != "[lib workflow.xml]" {
		t.Fatalf("ReadDir = %v", names)
	}

	if err := fs.Rename(root+"/tree", root+"/renamed"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(root + "/tree"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Stat(old) after rename: %v, want ErrNotExist", err)
	}
	if got := readFile(t, fs, root+"/renamed/workflow.xml"); got != "<workflow-app/>" {
		t.Fatalf("read back %q", got)
	}
	if got := readFile(t, fs, root+"/renamed/lib/big.bin"); got != string(big) {
		t.Fatalf("big file read back differs (len %d)", len(got))
	}
	if _, err := fs.Create(root + "/renamed/workflow.xml"); !errors.Is(err, os.ErrExist) {
		t.Fatalf("Create on existing file: %v, want ErrExist", err)
	}

	if err := fs.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Stat after RemoveAll: %v, want ErrNotExist", err)
	}
}

// TestConfDir checks the written client configuration names the NameNode.
func TestConfDir(t *testing.T) {
	c := hdfstest.Shared(t)
	conf, err := hadoopconf.Load(c.ConfDir())
	if err != nil {
		t.Fatal(err)
	}
	if nn := conf.Namenodes(); len(nn) != 1 || nn[0] != c.Addr() {
		t.Fatalf("Namenodes() = %v, want [%s]", nn, c.Addr())
	}
	if core := c.CoreSite(t); !strings.Contains(core, "<name>fs.defaultFS</name>") || !strings.Contains(core, c.URL("")) {
		t.Errorf("CoreSite() does not set fs.defaultFS to %s:\n%s", c.URL(""), core)
	}
	opts := hdfs.ClientOptionsFromConf(conf)
	opts.User = "alice"
	fs, err := hdfs.NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	// alice is not the superuser: HDFS enforces permissions.
	if err := fs.Mkdir("/"+t.Name(), 0o755); !errors.Is(err, os.ErrPermission) {
		t.Fatalf("Mkdir as alice in /: %v, want ErrPermission", err)
	}
}

// TestWebHDFS checks WebHDFS answers on HTTPAddr.
func TestWebHDFS(t *testing.T) {
	c := hdfstest.Shared(t)
	dir := "/" + t.Name()
	if err := c.Client().MkdirAll(dir+"/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + c.HTTPAddr() + "/webhdfs/v1" + dir + "?op=LISTSTATUS&user.name=" + c.User())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		FileStatuses struct {
			FileStatus []struct{ PathSuffix, Type string }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("status %s: %v", resp.Status, err)
	}
	if st := body.FileStatuses.FileStatus; len(st) != 1 || st[0].PathSuffix != "sub" || st[0].Type != "DIRECTORY" {
		t.Fatalf("LISTSTATUS = %+v", st)
	}
}

// TestNameNodeDown stops and restarts the NameNode of a cluster of its own:
// data written before survives, calls fail while it is down.
func TestNameNodeDown(t *testing.T) {
	c := hdfstest.StartT(t, hdfstest.Options{})
	ctx := context.Background()
	hdfstest.WriteFile(t, c.Client(), "/before", "kept")
	addr := c.Addr()

	if err := c.StopNameNode(ctx); err != nil {
		t.Fatal(err)
	}
	fs, err := c.NewClient(c.User())
	if err == nil {
		_, err = fs.Stat("/before")
		fs.Close()
	}
	if err == nil {
		t.Fatal("Stat succeeded with the NameNode down")
	}
	t.Logf("with the NameNode down: %v", err)

	start := time.Now()
	if err := c.StartNameNode(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("NameNode restart took %v", time.Since(start))
	if c.Addr() != addr {
		t.Fatalf("address changed: %s -> %s", addr, c.Addr())
	}
	fs, err = c.NewClient(c.User())
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	if got := readFile(t, fs, "/before"); got != "kept" {
		t.Fatalf("after restart read %q", got)
	}
	hdfstest.WriteFile(t, fs, path.Join("/", "after"), "new")

	// Kill leaves no JVM behind.
	pid := c.PID()
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("JVM %d still exists after Kill: %v", pid, err)
	}
}

// BenchmarkStart measures a cluster's start-up (JVM start to first write
// accepted) and shutdown: go test -run '^$' -bench Start -benchtime 3x ./internal/testenv/hdfstest/
func BenchmarkStart(b *testing.B) {
	hdfstest.SkipIfOptedOut(b)
	var up, down time.Duration
	for i := 0; i < b.N; i++ {
		began := time.Now()
		c, err := hdfstest.Start(context.Background(), hdfstest.Options{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		ready := time.Now()
		c.Stop()
		up += ready.Sub(began)
		down += time.Since(ready)
	}
	b.ReportMetric(up.Seconds()/float64(b.N), "s-to-ready")
	b.ReportMetric(down.Seconds()/float64(b.N), "s-to-stop")
}

// TestStartFailure: a cluster that cannot start yields an error carrying the
// tail of its log, and no JVM stays behind.
func TestStartFailure(t *testing.T) {
	hdfstest.SkipIfOptedOut(t)
	dir := t.TempDir()
	_, err := hdfstest.Start(context.Background(), hdfstest.Options{
		Dir: dir,
		// Storage under a regular file: formatting fails.
		Conf: map[string]string{"hdfs.minidfs.basedir": "/dev/null/dfs"},
	})
	if err == nil {
		t.Fatal("Start succeeded with a broken configuration")
	}
	if !strings.Contains(err.Error(), "last lines of") || !strings.Contains(err.Error(), "ERR start") {
		t.Fatalf("error lacks the log tail:\n%v", err)
	}
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		if b, _ := os.ReadFile(f); strings.Contains(string(b), dir) {
			t.Fatalf("a process still runs with %s: %s", dir, f)
		}
	}
}
