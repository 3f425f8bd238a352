package deploy

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/hdfstest"
	"github.com/celos-go/celos/internal/testenv/sshtest"
)

// benchTree writes the benchmark's deploy directory: hdfs/ with 1,000
// small files (1-4 KiB, in 10 directories) and one 100 MB jar, generated
// now (never committed). It returns the directory and the total bytes.
func benchTree(b *testing.B) (string, int64) {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "project")
	var total int64
	small := make([]byte, 4096)
	for i := 0; i < 1000; i++ {
		n := 1024 + (i*977)%3072
		rand.Read(small[:n])
		p := filepath.Join(dir, "hdfs", fmt.Sprintf("conf%d", i%10), fmt.Sprintf("file%04d.xml", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, small[:n], 0o644); err != nil {
			b.Fatal(err)
		}
		total += int64(n)
	}
	jar := filepath.Join(dir, "hdfs", "lib", "job.jar")
	if err := os.MkdirAll(filepath.Dir(jar), 0o755); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(jar)
	if err != nil {
		b.Fatal(err)
	}
	const jarSize = 100 << 20
	if _, err := io.CopyN(f, rand.Reader, jarSize); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return dir, total + jarSize
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func mbps(bytes int64, d time.Duration) float64 { return float64(bytes) / 1e6 / d.Seconds() }

// BenchmarkDeploySFTP uploads the benchmark tree to the real OpenSSH
// server, side by side in one run: OpenSSH's own `sftp -b` (put -r), and
// celos deploy (its whole run: target, lock, upload of the Oozie
// directory over SFTP with fs.defaultFS file:///, swap, workflows file,
// manifest). Three alternating rounds; the medians are reported, with
// the CPU time each used on this machine (client process plus the sshd
// sessions that served it), which the machine's load distorts less.
//
//	go test -run '^$' -bench DeploySFTP -benchtime 1x ./deploy/
func BenchmarkDeploySFTP(b *testing.B) {
	srv := sshtest.Start(b, sshtest.Options{})
	dir, total := benchTree(b)
	const rounds = 3
	for i := 0; i < b.N; i++ {
		var sftpTimes, deployTimes, sftpCPU, deployCPU []time.Duration
		for round := 0; round < rounds; round++ {
			// OpenSSH's client: put -r into a fresh directory.
			dest := filepath.Join(srv.Root, "sftp-"+strconv.Itoa(round))
			batch := filepath.Join(b.TempDir(), "batch")
			if err := os.WriteFile(batch, []byte("put -r "+filepath.Join(dir, "hdfs")+" "+dest+"\n"), 0o644); err != nil {
				b.Fatal(err)
			}
			cmd := exec.Command("sftp", "-q", "-b", batch, "-i", srv.ClientKeyPath, "-P", strconv.Itoa(srv.Port),
				"-o", "UserKnownHostsFile="+srv.KnownHostsPath, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
				srv.User+"@"+srv.Host)
			srvCPU := serverCPU(b, srv)
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("sftp -b: %v\n%s", err, out)
			}
			sftpTimes = append(sftpTimes, time.Since(start))
			sftpCPU = append(sftpCPU, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime()+serverCPU(b, srv)-srvCPU)
			os.RemoveAll(dest)

			// celos deploy.
			r := newBenchRemote(b, srv, dir, round)
			srvCPU = serverCPU(b, srv)
			ownCPU := selfCPU(b)
			start = time.Now()
			res, err := Deploy(context.Background(), r)
			if err != nil {
				b.Fatal(err)
			}
			deployTimes = append(deployTimes, time.Since(start))
			r.Connector.Close() // ends the sshd session, so its CPU time is counted
			deployCPU = append(deployCPU, selfCPU(b)-ownCPU+serverCPU(b, srv)-srvCPU)
			if res.Bytes != total || res.Files != 1001 {
				b.Fatalf("deployed %d files, %d bytes", res.Files, res.Bytes)
			}
			os.RemoveAll(filepath.Join(srv.Root, "inst"+strconv.Itoa(round)))
		}
		ms, md := median(sftpTimes), median(deployTimes)
		b.ReportMetric(mbps(total, ms), "sftp-b-MB/s")
		b.ReportMetric(mbps(total, md), "deploy-MB/s")
		b.ReportMetric(ms.Seconds(), "sftp-b-s")
		b.ReportMetric(md.Seconds(), "deploy-s")
		b.ReportMetric(median(sftpCPU).Seconds(), "sftp-b-cpu-s")
		b.ReportMetric(median(deployCPU).Seconds(), "deploy-cpu-s")
		b.Logf("1,001 files, %.1f MB: sftp -b put -r %v (median of %v), celos deploy %v (median of %v); CPU time client+sshd: sftp -b %v, deploy %v",
			float64(total)/1e6, ms, sftpTimes, md, deployTimes, sftpCPU, deployCPU)
	}
}

// selfCPU is the CPU time (user and system) this process used so far.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU is the CPU time the sshd's finished sessions used: the
// listening sshd's cutime+cstime, once it has reaped every session (it has
// no child process left; the caller closed its connections).
func serverCPU(b *testing.B, srv *sshtest.Server) time.Duration {
	pid := strconv.Itoa(srv.PID())
	for deadline := time.Now().Add(30 * time.Second); ; {
		kids, err := os.ReadFile("/proc/" + pid + "/task/" + pid + "/children")
		if err != nil {
			b.Fatalf("sshd's child processes: %v", err)
		}
		if len(strings.TrimSpace(string(kids))) == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("sshd %s still has sessions %s", pid, kids)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	// pid (comm) state ppid ...: cutime and cstime are fields 16 and 17.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	var ticks int64
	for _, s := range f[13:15] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatalf("sshd stat %q: %v", stat, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// newBenchRemote makes an installation on srv for round n and returns the
// deploy options.
func newBenchRemote(b *testing.B, srv *sshtest.Server, deployDir string, n int) Options {
	inst := filepath.Join(srv.Root, "inst"+strconv.Itoa(n))
	r := newRemoteIn(b, srv, inst, localCore, inst+"/hdfs")
	r.deployDir = deployDir
	return r.options(b)
}

// BenchmarkDeployHDFS deploys the benchmark tree to the HDFS mini cluster
// (one DataNode, on this machine) and reports MB/s.
//
//	go test -run '^$' -bench DeployHDFS -benchtime 1x ./deploy/
func BenchmarkDeployHDFS(b *testing.B) {
	cl := hdfstest.Shared(b)
	core, err := os.ReadFile(filepath.Join(cl.ConfDir(), "core-site.xml"))
	if err != nil {
		b.Fatal(err)
	}
	srv := sshtest.Start(b, sshtest.Options{})
	dir, total := benchTree(b)
	for i := 0; i < b.N; i++ {
		inst := filepath.Join(srv.Root, "inst"+strconv.Itoa(i))
		r := newRemoteIn(b, srv, inst, string(core), "/bench"+strconv.Itoa(i))
		r.deployDir = dir
		r.user = cl.User()
		start := time.Now()
		res, err := Deploy(context.Background(), r.options(b))
		if err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		b.ReportMetric(mbps(total, d), "MB/s")
		b.ReportMetric(d.Seconds(), "s")
		b.Logf("HDFS: %d files, %.1f MB in %v", res.Files, float64(res.Bytes)/1e6, d)
	}
}
