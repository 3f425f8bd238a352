package deploy

import (
	"bytes"
	"context"
	"crypto/rand"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/hdfstest"
	"github.com/celos-go/celos/internal/testenv/sshtest"
)

// written is what this process has passed to write(2) and its kin so
// far (/proc/self/io wchar). During a deploy that is the bytes sent on the
// SSH connection (ciphertext and SSH framing included) and the files it
// writes into the cache directory (localWrites).
func written(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("wchar: ")); ok {
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no wchar in /proc/self/io")
	return 0
}

// localWrites is the size of the files under dir modified since start
// (each is written whole, once per deploy at most).
func localWrites(b *testing.B, dir string, start time.Time) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil && !fi.ModTime().Before(start) {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkRedeploySFTP redeploys the benchmark tree (1,000 small files
// and a 100 MB jar, 107.4 MB) to the real OpenSSH server (fs.defaultFS
// file:///) after it was deployed once, three ways in alternating rounds:
// with the previous manifest removed first (so every file is sent again:
// what a redeploy did before deploys were incremental), with nothing
// changed, and with one small file changed. It reports the median wall
// time of each and the bytes sent to the server. It uses
// only what Deploy had before (it also runs on older code, where every
// variant sends everything).
//
//	go test -run '^$' -bench RedeploySFTP -benchtime 1x ./deploy/
func BenchmarkRedeploySFTP(b *testing.B) {
	srv := sshtest.Start(b, sshtest.Options{})
	dir, total := benchTree(b)
	ctx := context.Background()
	cacheDir := b.TempDir()
	var cpu []time.Duration // of the last deploy: client and sshd, user+system
	deploy := func(r Options) (time.Duration, int64) {
		r.CacheDir = cacheDir // what the command sets (unknown to older code: remove there)
		own, srvCPU := selfCPU(b), serverCPU(b, srv)
		w := written(b)
		start := time.Now()
		if _, err := Deploy(ctx, r); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		sent := written(b) - w
		sent -= localWrites(b, cacheDir, start) // (older code: remove)
		r.Connector.Close()
		cpu = append(cpu, selfCPU(b)-own+serverCPU(b, srv)-srvCPU)
		return d, sent
	}
	const rounds = 3
	for i := 0; i < b.N; i++ {
		var full, same, one, fullCPU, sameCPU, oneCPU []time.Duration
		var fullB, sameB, oneB []time.Duration // bytes, as durations for median()
		r := newBenchRemote(b, srv, dir, i)
		deploy(r) // the first deployment
		for round := 0; round < rounds; round++ {
			if err := os.Remove(filepath.Join(srv.Root, "inst"+strconv.Itoa(i), "celos", "workflows", StateDir, "wordcount.manifest.json")); err != nil {
				b.Fatal(err)
			}
			d, n := deploy(newBenchRemote2(b, srv, dir, i))
			full, fullB, fullCPU = append(full, d), append(fullB, time.Duration(n)), append(fullCPU, cpu[len(cpu)-1])

			d, n = deploy(newBenchRemote2(b, srv, dir, i))
			same, sameB, sameCPU = append(same, d), append(sameB, time.Duration(n)), append(sameCPU, cpu[len(cpu)-1])

			conf := filepath.Join(dir, "hdfs", "conf3", "file0003.xml")
			if err := os.WriteFile(conf, []byte("<configuration>round "+strconv.Itoa(round)+"</configuration>\n"), 0o644); err != nil {
				b.Fatal(err)
			}
			d, n = deploy(newBenchRemote2(b, srv, dir, i))
			one, oneB, oneCPU = append(one, d), append(oneB, time.Duration(n)), append(oneCPU, cpu[len(cpu)-1])
		}
		b.ReportMetric(median(full).Seconds(), "full-s")
		b.ReportMetric(median(same).Seconds(), "unchanged-s")
		b.ReportMetric(median(one).Seconds(), "onefile-s")
		b.ReportMetric(median(fullCPU).Seconds(), "full-cpu-s")
		b.ReportMetric(median(sameCPU).Seconds(), "unchanged-cpu-s")
		b.ReportMetric(median(oneCPU).Seconds(), "onefile-cpu-s")
		b.ReportMetric(float64(median(fullB))/1e6, "full-MB-sent")
		b.ReportMetric(float64(median(sameB))/1e6, "unchanged-MB-sent")
		b.ReportMetric(float64(median(oneB))/1e6, "onefile-MB-sent")
		b.Logf("%.1f MB project: full %v %v B, unchanged %v %v B, one file %v %v B",
			float64(total)/1e6, full, fullB, same, sameB, one, oneB)
	}
}

// newBenchRemote2 returns deploy options for the installation
// newBenchRemote made for round n, without rewriting it.
func newBenchRemote2(b *testing.B, srv *sshtest.Server, deployDir string, n int) Options {
	inst := filepath.Join(srv.Root, "inst"+strconv.Itoa(n))
	r := &remote{srv: srv, target: srv.URL(inst + "/target.json"), deployDir: deployDir, project: project("wordcount", "wordcount-lax", "wordcount-nyc")}
	return r.options(b)
}

// BenchmarkRedeployHDFS redeploys the benchmark tree to the HDFS mini
// cluster after it was deployed once: with the previous manifest removed
// (the whole tree sent, as before deploys were incremental; also what a
// changed project costs on HDFS, which has no hard links) and unchanged,
// in alternating rounds; median wall times.
//
//	go test -run '^$' -bench RedeployHDFS -benchtime 1x ./deploy/
func BenchmarkRedeployHDFS(b *testing.B) {
	cl := hdfstest.Shared(b)
	core, err := os.ReadFile(filepath.Join(cl.ConfDir(), "core-site.xml"))
	if err != nil {
		b.Fatal(err)
	}
	srv := sshtest.Start(b, sshtest.Options{})
	dir, _ := benchTree(b)
	ctx := context.Background()
	cacheDir := b.TempDir()
	for i := 0; i < b.N; i++ {
		inst := filepath.Join(srv.Root, "hdfs-inst"+strconv.Itoa(i))
		r := newRemoteIn(b, srv, inst, string(core), "/redeploy"+strconv.Itoa(i))
		r.deployDir, r.user = dir, cl.User()
		deploy := func() time.Duration {
			o := r.options(b)
			o.CacheDir = cacheDir // what the command sets (unknown to older code: remove there)
			start := time.Now()
			if _, err := Deploy(ctx, o); err != nil {
				b.Fatal(err)
			}
			d := time.Since(start)
			o.Connector.Close()
			return d
		}
		deploy()
		var full, same []time.Duration
		for round := 0; round < 3; round++ {
			if err := os.Remove(filepath.Join(r.wfDir, StateDir, "wordcount.manifest.json")); err != nil {
				b.Fatal(err)
			}
			full = append(full, deploy())
			same = append(same, deploy())
		}
		b.ReportMetric(median(full).Seconds(), "full-s")
		b.ReportMetric(median(same).Seconds(), "unchanged-s")
		b.Logf("HDFS: full %v, unchanged %v", full, same)
	}
}

// smallTree writes a deploy directory whose hdfs/ holds n small files
// (1-4 KiB) in n/100 directories and returns it. Its files are made to
// look two minutes old, as a project's files are when it is deployed
// (the checksum cache skips files changed in the last seconds).
func smallTree(b *testing.B, n int) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "project")
	buf := make([]byte, 4096)
	old := time.Now().Add(-2 * time.Minute)
	for i := 0; i < n; i++ {
		size := 1024 + (i*977)%3072
		if _, err := rand.Read(buf[:size]); err != nil {
			b.Fatal(err)
		}
		p := filepath.Join(dir, "hdfs", "d"+strconv.Itoa(i%(n/100)), "f"+strconv.Itoa(i)+".xml")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, buf[:size], 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// BenchmarkRedeployUnchangedSFTP: an unchanged redeploy of 1,000 and of
// 10,000 small files to the real OpenSSH server (after a first deploy and
// one redeploy that records the local checksums), median wall and CPU
// time (this process and the sshd sessions) of five: the time should not
// grow with the project's size. Also runs on older code (remove the
// CacheDir line there if it has none).
//
//	go test -run '^$' -bench RedeployUnchangedSFTP -benchtime 1x ./deploy/
func BenchmarkRedeployUnchangedSFTP(b *testing.B) {
	srv := sshtest.Start(b, sshtest.Options{})
	ctx := context.Background()
	for _, n := range []int{1000, 10000} {
		b.Run("files="+strconv.Itoa(n), func(b *testing.B) {
			dir := smallTree(b, n)
			cacheDir := b.TempDir()
			for i := 0; i < b.N; i++ {
				deploy := func(o Options) (time.Duration, time.Duration, *Result) {
					o.CacheDir = cacheDir
					own, srvCPU := selfCPU(b), serverCPU(b, srv)
					start := time.Now()
					res, err := Deploy(ctx, o)
					if err != nil {
						b.Fatal(err)
					}
					d := time.Since(start)
					o.Connector.Close()
					return d, selfCPU(b) - own + serverCPU(b, srv) - srvCPU, res
				}
				deploy(newBenchRemote(b, srv, dir, 100*n+i))
				deploy(newBenchRemote2(b, srv, dir, 100*n+i))
				var wall, cpu []time.Duration
				for round := 0; round < 5; round++ {
					d, c, res := deploy(newBenchRemote2(b, srv, dir, 100*n+i))
					if !res.HDFSUnchanged || !res.WorkflowsUnchanged {
						b.Fatalf("round %d: not unchanged: %+v", round, res)
					}
					wall, cpu = append(wall, d), append(cpu, c)
				}
				b.ReportMetric(median(wall).Seconds(), "unchanged-s")
				b.ReportMetric(median(cpu).Seconds(), "unchanged-cpu-s")
				b.Logf("%d files: unchanged %v, cpu %v", n, wall, cpu)
			}
		})
	}
}
