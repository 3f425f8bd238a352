package faults

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/slot"
)

// A restart round: how and when the server is stopped, which jobs end
// while it is down, and the workflows' maxRetryCount.
type restartRound struct {
	name  string
	stop  string  // "kill9" or "sigterm"
	frac  float64 // stop once this fraction of the jobs has a job directory; 0: once every slot is RUNNING
	ended string  // jobs that end while the server is down: "none", "half" (even workflows) or "all"
	retry int
}

// Restart installation: rsWorkflows hourly workflows × nHours slots. Each
// run appends its external ID to runs/<workflow>-<hour>, then waits on a
// gate (a shared flock on gate-even or gate-odd, which the test holds
// exclusively until it releases the gate), then appends its ID to
// done/<workflow>-<hour> and exits 0.
const rsWorkflows = 20

func writeRestartProject(t *testing.T, dir string, retry int) (runs, done string) {
	t.Helper()
	runs, done = filepath.Join(dir, "runs"), filepath.Join(dir, "done")
	for _, d := range []string{filepath.Join(dir, "wf"), runs, done} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := fixture.Project("restart")
	for i := 0; i < rsWorkflows; i++ {
		gate := filepath.Join(dir, "gate-even")
		if i%2 == 1 {
			gate = filepath.Join(dir, "gate-odd")
		}
		w := fixture.Hourly(fmt.Sprintf("w%02d", i))
		w.SchedulingStrategy.Concurrency = nHours
		w.ExternalService = fixture.Command("sh", "-c",
			`f="$CELOS_WORKFLOW-$CELOS_HOUR"; echo "$CELOS_EXTERNAL_ID" >> "$RUNS/$f"; flock -s "$GATE" true; echo "$CELOS_EXTERNAL_ID" >> "$DONE/$f"`)
		w.ExternalService.Env = map[string]string{"RUNS": runs, "DONE": done, "GATE": gate}
		w.StartTime = crashT0
		w.MaxRetryCount = retry
		p.Workflows = append(p.Workflows, w)
	}
	fixture.Write(t, filepath.Join(dir, "wf"), p)
	return runs, done
}

// gate is a file the test holds an exclusive flock on; jobs waiting for a
// shared lock on it run until release.
type gate struct{ f *os.File }

func closeGate(t *testing.T, path string) *gate {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	g := &gate{f}
	t.Cleanup(g.release) // jobs end with the test
	return g
}

func (g *gate) release() {
	if g.f != nil {
		g.f.Close()
		g.f = nil
	}
}

// countLines counts the lines of the files in dir (for workflows selected
// by keep; nil: all).
func countLines(t *testing.T, dir string, keep func(wf int) bool) int {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	n := 0
	for _, e := range entries {
		var wf, h int
		if _, err := fmt.Sscanf(e.Name(), "w%02d-%02d", &wf, &h); err != nil || (keep != nil && !keep(wf)) {
			continue
		}
		n += len(readLines(t, filepath.Join(dir, e.Name())))
	}
	return n
}

// waitFor polls cond until it holds, failing after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCommandJobsSurviveRestart stops a real `celos server` with SIGKILL or
// SIGTERM while its command jobs are being submitted or are running, lets
// none, half or all of the jobs end while no server runs, restarts the
// server on the same directories and steps until every slot is final, with
// maxRetryCount 0 and 1. Every command exits 0, so whatever the point of the
// stop: every slot ran exactly once (runs == slots), is SUCCESS and records
// the external ID of its one run; a job that never started (the server
// stopped before its command was started) is never reported as a failure
// but abandoned and the slot submitted once more, and the log names every
// such job with the reason; every transition out of RUNNING logs the
// reason (the job's status).
func TestCommandJobsSurviveRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts celos server processes")
	}
	rounds := []restartRound{
		{name: "kill9 mid-submit 3% retry0", stop: "kill9", frac: 0.03, ended: "all", retry: 0},
		{name: "kill9 mid-submit 50% retry1", stop: "kill9", frac: 0.5, ended: "half", retry: 1},
		{name: "sigterm mid-submit 30% retry1", stop: "sigterm", frac: 0.3, ended: "all", retry: 1},
		{name: "kill9 running retry0", stop: "kill9", ended: "half", retry: 0},
		{name: "kill9 running retry1", stop: "kill9", ended: "none", retry: 1},
		{name: "sigterm running retry0", stop: "sigterm", ended: "half", retry: 0},
		{name: "sigterm running retry1", stop: "sigterm", ended: "none", retry: 1},
	}
	total := rsWorkflows * nHours
	for _, r := range rounds {
		t.Run(r.name, func(t *testing.T) {
			dir := t.TempDir()
			runs, done := writeRestartProject(t, dir, r.retry)
			even, odd := closeGate(t, filepath.Join(dir, "gate-even")), closeGate(t, filepath.Join(dir, "gate-odd"))
			jobs := filepath.Join(dir, "jobs")
			now := url.Values{"time": {slot.FormatTime(crashStepTime())}}
			s := startServer(t, dir)
			if code, body := s.post("/scheduler", now); code != 200 {
				t.Fatalf("step 1: %d %s", code, body)
			}
			if r.frac > 0 {
				go func() {
					if resp, err := http.Post(s.URL+"/scheduler?"+now.Encode(), "", nil); err == nil {
						resp.Body.Close()
					}
				}()
				want := max(1, int(r.frac*float64(total)))
				waitFor(t, 60*time.Second, "jobs not submitted", func() bool { return countJobs(jobs) >= want })
			} else {
				if code, body := s.post("/scheduler", now); code != 200 {
					t.Fatalf("step 2: %d %s", code, body)
				}
				waitFor(t, 60*time.Second, "jobs not started", func() bool { return countLines(t, runs, nil) >= total })
			}
			logs := ""
			switch r.stop {
			case "kill9":
				s.kill9()
			case "sigterm":
				s.stop()
				if s.err != nil {
					t.Errorf("celos server stopped by SIGTERM: %v", s.err)
				}
			}
			logs += s.stderr.String()
			if r.stop == "kill9" && r.frac > 0 {
				plantUnstartedJobs(t, dir, 3)
			}
			started := countLines(t, runs, nil)
			t.Logf("stopped with %d job directories, %d commands started", countJobs(jobs), started)

			// Jobs that end while no server runs.
			var endedWhileDown func(wf int) bool
			switch r.ended {
			case "half":
				even.release()
				endedWhileDown = func(wf int) bool { return wf%2 == 0 }
			case "all":
				even.release()
				odd.release()
				endedWhileDown = func(int) bool { return true }
			}
			if endedWhileDown != nil {
				// Every command of those workflows that started (or is
				// starting: a job the server had launched) ends.
				waitFor(t, 60*time.Second, "released jobs did not end", func() bool {
					return countLines(t, done, endedWhileDown) == countLines(t, runs, endedWhileDown)
				})
				time.Sleep(200 * time.Millisecond) // late starters
				waitFor(t, 60*time.Second, "released jobs did not end", func() bool {
					return countLines(t, done, endedWhileDown) == countLines(t, runs, endedWhileDown)
				})
			}

			s = startServer(t, dir)
			step := func() {
				t.Helper()
				if code, body := s.post("/scheduler", now); code != 200 {
					t.Fatalf("step after restart: %d %s", code, body)
				}
			}
			// Two steps with the remaining jobs still running: none of
			// them is final, none ran twice.
			step()
			step()
			if c := countLines(t, runs, nil); c > total {
				t.Errorf("%d runs for %d slots with jobs still running after the restart", c, total)
			}
			even.release()
			odd.release()
			s.stepUntilFinal(now, rsWorkflows)
			all := make([]map[string]slotJSON, rsWorkflows)
			for i := range all {
				all[i] = s.slots(fmt.Sprintf("w%02d", i), crashT0, crashStepTime())
			}
			s.stop()
			logs += s.stderr.String()

			ran := map[string]bool{}
			for i := 0; i < rsWorkflows; i++ {
				wf := fmt.Sprintf("w%02d", i)
				slots := all[i]
				if len(slots) != nHours {
					t.Errorf("%s has %d slots, want %d", wf, len(slots), nHours)
				}
				for _, l := range checkRanOnce(t, runs, wf, crashT0, nHours, slots, "SUCCESS") {
					ran[l] = true
				}
			}
			if c := countLines(t, runs, nil); c != total {
				t.Errorf("%d runs for %d slots", c, total)
			}
			// Every job that did not run is named in the log with the
			// reason.
			abandoned := 0
			wfs, _ := os.ReadDir(jobs)
			for _, w := range wfs {
				js, _ := os.ReadDir(filepath.Join(jobs, w.Name()))
				for _, j := range js {
					ext := w.Name() + "@" + j.Name()
					if ran[ext] {
						continue
					}
					abandoned++
					named := false
					for _, l := range strings.Split(logs, "\n") {
						named = named || (strings.Contains(l, ext) && strings.Contains(l, "never started") && strings.Contains(l, "reason="))
					}
					if !named {
						t.Errorf("job %s never ran, and no log line says why", ext)
					}
				}
			}
			// Every transition out of RUNNING says why.
			for _, l := range strings.Split(logs, "\n") {
				if strings.Contains(l, `msg="slot transition"`) && strings.Contains(l, "from=RUNNING") && !strings.Contains(l, "reason=") {
					t.Errorf("a transition out of RUNNING without a reason: %s", l)
				}
			}
			t.Logf("%d jobs never started (abandoned, slot submitted once more)", abandoned)
			checkStateDB(t, filepath.Join(dir, "db"))
		})
	}
}

// plantUnstartedJobs leaves, for up to n slots with a submit intent and no
// job, what a server killed between writing a job's job.json and starting
// its supervisor leaves: the job's directory with job.json only. (The kill
// rarely falls in that window by itself: the supervisor is started right
// after job.json.)
func plantUnstartedJobs(t *testing.T, dir string, n int) {
	t.Helper()
	for i := 0; i < rsWorkflows && n > 0; i++ {
		wf := fmt.Sprintf("w%02d", i)
		for h := 0; h < nHours && n > 0; h++ {
			st := crashT0.Add(time.Duration(h) * time.Hour)
			intent := filepath.Join(dir, "db", "intent", wf, st.Format("2006-01-02"), st.Format("15:04:05.000")+"Z")
			if _, err := os.Stat(intent); err != nil {
				continue
			}
			prefix := st.Format("20060102T150405Z") + "."
			js, _ := os.ReadDir(filepath.Join(dir, "jobs", wf))
			has := false
			for _, j := range js {
				has = has || strings.HasPrefix(j.Name(), prefix)
			}
			if has {
				continue
			}
			job := filepath.Join(dir, "jobs", wf, prefix+fmt.Sprint(time.Now().UnixNano()))
			if err := os.MkdirAll(job, 0o755); err != nil {
				t.Fatal(err)
			}
			rec := fmt.Sprintf(`{"workflow":%q,"slot":%q,"argv":["false"],"pid":0,"started":%q,"supervised":true}`+"\n",
				wf, slot.FormatTime(st), time.Now().UTC().Format(time.RFC3339Nano))
			if err := os.WriteFile(filepath.Join(job, "job.json"), []byte(rec), 0o644); err != nil {
				t.Fatal(err)
			}
			n--
		}
	}
}
