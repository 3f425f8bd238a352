package faults

import (
	"bufio"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/ooziefake"
	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/oozie"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
)

// Crash-test installation: nWorkflows hourly workflows with an always
// trigger, nHours slots each in the window, run by the command service. Each
// run appends its external ID to runs/<workflow>-<hour>, so the test counts
// how often each slot ran.
const (
	nWorkflows = 40
	nHours     = 6
)

var crashT0 = time.Date(2015, 9, 13, 0, 0, 0, 0, time.UTC)

func crashStepTime() time.Time { return crashT0.Add(nHours*time.Hour - 30*time.Minute) }

// writeCrashProject writes the workflows file and returns the runs dir.
// Its jobs run on the command service, or on the Oozie at oozieURL.
func writeCrashProject(t *testing.T, dir, oozieURL string) string {
	t.Helper()
	runs := filepath.Join(dir, "runs")
	for _, d := range []string{filepath.Join(dir, "wf"), runs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := fixture.Project("crash")
	for i := 0; i < nWorkflows; i++ {
		w := fixture.Hourly(fmt.Sprintf("w%02d", i))
		w.SchedulingStrategy.Concurrency = nHours
		w.ExternalService = fixture.Command("sh", "-c", `echo "$CELOS_EXTERNAL_ID" >> '`+runs+`'/"$CELOS_WORKFLOW-$CELOS_HOUR"`)
		w.StartTime = crashT0
		if oozieURL != "" {
			w.ExternalService = fixture.Oozie(map[string]string{
				"user.name": "celos", "oozie.wf.application.path": "hdfs:///apps/crash",
			})
			w.ExternalService.URL = oozieURL
		}
		p.Workflows = append(p.Workflows, w)
	}
	fixture.Write(t, filepath.Join(dir, "wf"), p)
	return runs
}

// countJobs counts the job directories the command service made.
func countJobs(jobs string) int {
	n := 0
	wfs, _ := os.ReadDir(jobs)
	for _, w := range wfs {
		js, _ := os.ReadDir(filepath.Join(jobs, w.Name()))
		n += len(js)
	}
	return n
}

// TestKill9MidStepThenRestart kills a real `celos server` with SIGKILL
// while a step is submitting 240 slots (at a different point each round),
// restarts it on the same state directory, and steps until every slot is
// final. Whatever the point of the kill: every slot ran exactly once, is
// SUCCESS (its command exits 0; a job's supervisor outlives the server and
// records that, also when the command ended while no server ran) and
// records that run's external ID (the submit intent and the command
// service's Recover find a job started before the kill; one that never
// started is abandoned and the slot submitted once more), no state file is
// corrupt or half-written, no temporary file or submit intent is left.
// While the first server runs, a second one on the same state directory
// refuses to start. TestCommandJobsSurviveRestart stops the server at more
// points, with SIGTERM too.
func TestKill9MidStepThenRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts celos server processes")
	}
	total := nWorkflows * nHours
	for round, frac := range []float64{0.02, 0.5, 0.97} {
		t.Run(fmt.Sprintf("kill at %d%%", int(frac*100)), func(t *testing.T) {
			dir := t.TempDir()
			runs := writeCrashProject(t, dir, "")
			now := url.Values{"time": {slot.FormatTime(crashStepTime())}}
			s := startServer(t, dir)

			if round == 0 {
				// Two servers on one state directory: the second refuses.
				dir2 := t.TempDir()
				os.Symlink(filepath.Join(dir, "wf"), filepath.Join(dir2, "wf"))
				os.Symlink(filepath.Join(dir, "db"), filepath.Join(dir2, "db"))
				second := launch(t, dir2)
				if err := second.wait(30 * time.Second); err == nil || !strings.Contains(second.stderr.String(), "in use by process") {
					t.Fatalf("a second server on the same state directory: %v\n%s", err, second.stderr)
				}
			}

			// Step 1: every slot WAITING → READY.
			if code, body := s.post("/scheduler", now); code != 200 {
				t.Fatalf("step 1: %d %s", code, body)
			}
			// Step 2 submits every slot; kill the server once a fraction
			// of them has a job directory.
			go func() {
				if resp, err := http.Post(s.URL+"/scheduler?"+now.Encode(), "", nil); err == nil {
					resp.Body.Close() // the kill usually cuts it
				}
			}()
			want := max(1, int(frac*float64(total)))
			deadline := time.Now().Add(60 * time.Second)
			for countJobs(filepath.Join(dir, "jobs")) < want && time.Now().Before(deadline) {
				time.Sleep(500 * time.Microsecond)
			}
			s.kill9()
			atKill := countJobs(filepath.Join(dir, "jobs"))
			t.Logf("killed with %d of %d jobs started", atKill, total)
			if atKill >= total {
				t.Logf("the step finished before the kill")
			}

			// Restart on the same state directory and step until done.
			s = startServer(t, dir)
			s.stepUntilFinal(now, nWorkflows)

			// Every slot ran exactly once and is SUCCESS.
			for i := 0; i < nWorkflows; i++ {
				wf := fmt.Sprintf("w%02d", i)
				slots := s.slots(wf, crashT0, crashStepTime())
				if len(slots) != nHours {
					t.Errorf("%s has %d slots, want %d", wf, len(slots), nHours)
				}
				checkRanOnce(t, runs, wf, crashT0, nHours, slots, "SUCCESS")
			}
			if strings.Contains(s.stderr.String(), "submitting again") {
				t.Errorf("the engine resubmitted without asking the service:\n%s", s.stderr)
			}
			s.stop()
			checkStateDB(t, filepath.Join(dir, "db"))
		})
	}
}

// notFinal lists the slots of the crash project's first nWf workflows
// (w00, w01, ...) in [crashT0, crashStepTime()) that are not final, as
// "wf@time STATUS".
func (s *server) notFinal(nWf int) []string {
	s.t.Helper()
	var pending []string
	for i := 0; i < nWf; i++ {
		wf := fmt.Sprintf("w%02d", i)
		for tm, sl := range s.slots(wf, crashT0, crashStepTime()) {
			if !slot.Status(sl.Status).Final() {
				pending = append(pending, wf+"@"+tm+" "+sl.Status)
			}
		}
	}
	return pending
}

// stepUntilFinal steps the server at now (POST /scheduler, which must
// answer 200) until notFinal(nWf) is empty, and fails the test if that
// takes more than 90 s: the last phase of the crash and restart tests.
func (s *server) stepUntilFinal(now url.Values, nWf int) {
	s.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		if code, body := s.post("/scheduler", now); code != 200 {
			s.t.Fatalf("step after restart: %d %s", code, body)
		}
		pending := s.notFinal(nWf)
		if len(pending) == 0 {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("slots not final 90s after the restart: %v\n%s", pending, s.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkRanOnce checks the hours hourly slots of wf from t0 (slots is what
// server.slots returned for them) against runs/<wf>-<hour>, where the
// crash projects' commands append their external ID: each slot ran
// exactly once and records that run; with wantStatus set, it has that
// status too. It returns every run it read.
func checkRanOnce(t *testing.T, runs, wf string, t0 time.Time, hours int, slots map[string]slotJSON, wantStatus string) []string {
	t.Helper()
	var all []string
	for h := 0; h < hours; h++ {
		lines := readLines(t, filepath.Join(runs, fmt.Sprintf("%s-%02d", wf, h)))
		all = append(all, lines...)
		sl := slots[slot.FormatTime(t0.Add(time.Duration(h)*time.Hour))]
		if len(lines) != 1 {
			t.Errorf("%s hour %02d ran %d times: %v (%s)", wf, h, len(lines), lines, sl.Status)
			continue
		}
		if sl.ExternalID == nil || *sl.ExternalID != lines[0] {
			t.Errorf("%s hour %02d records job %v, the run was %s", wf, h, sl.ExternalID, lines[0])
		}
		if wantStatus != "" && sl.Status != wantStatus {
			t.Errorf("%s hour %02d is %s, want %s; its one run (%s) exited 0", wf, h, sl.Status, wantStatus, lines[0])
		}
	}
	return all
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// checkStateDB opens a state directory no server holds and checks that
// every file parses, no temporary file is left, and no submit intent is.
func checkStateDB(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Error(err)
			return nil
		}
		if strings.HasPrefix(d.Name(), ".tmp-") {
			t.Errorf("temporary file left: %s", p)
		}
		if !d.IsDir() && strings.Contains(p, string(filepath.Separator)+"intent"+string(filepath.Separator)) {
			t.Errorf("submit intent left: %s", p)
		}
		return nil
	})
	db, err := statedb.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	wfs, err := db.Workflows()
	if err != nil {
		t.Fatal(err)
	}
	for _, wf := range wfs {
		if _, err := db.Range(wf, time.Unix(0, 0), time.Now()); err != nil {
			t.Error(err)
		}
	}
	if p := db.Problems(); len(p) > 0 {
		t.Errorf("state database problems: %v", p)
	}
}

// TestKill9MidStepOozie is the same crash with the oozie service against
// the fake Oozie: the server is killed with SIGKILL while it submits 240
// slots (at a different point each round) and restarted. Each slot ends
// with exactly one Oozie job, the one it records: a job Oozie accepted
// before the kill is found by Recover (by its celosWorkflowName) from the
// submit intent left on disk.
func TestKill9MidStepOozie(t *testing.T) {
	if testing.Short() {
		t.Skip("starts celos server processes")
	}
	total := nWorkflows * nHours
	for _, frac := range []float64{0.02, 0.5, 0.97} {
		t.Run(fmt.Sprintf("kill at %d%%", int(frac*100)), func(t *testing.T) {
			fake, err := ooziefake.Start()
			if err != nil {
				t.Fatal(err)
			}
			defer fake.Close()
			fake.SetPlan(func(map[string]string) []string { return []string{ooziefake.Running} }) // until told
			dir := t.TempDir()
			writeCrashProject(t, dir, fake.URL)
			now := url.Values{"time": {slot.FormatTime(crashStepTime())}}
			s := startServer(t, dir)
			if code, body := s.post("/scheduler", now); code != 200 {
				t.Fatalf("step 1: %d %s", code, body)
			}
			go func() {
				if resp, err := http.Post(s.URL+"/scheduler?"+now.Encode(), "", nil); err == nil {
					resp.Body.Close()
				}
			}()
			want := max(1, int(frac*float64(total)))
			deadline := time.Now().Add(60 * time.Second)
			for len(fake.Jobs()) < want && time.Now().Before(deadline) {
				time.Sleep(200 * time.Microsecond)
			}
			s.kill9()
			t.Logf("killed with %d of %d jobs submitted", len(fake.Jobs()), total)

			s = startServer(t, dir)
			running := func() (n int) {
				for i := 0; i < nWorkflows; i++ {
					for _, sl := range s.slots(fmt.Sprintf("w%02d", i), crashT0, crashStepTime()) {
						if sl.Status == "RUNNING" {
							n++
						} else if sl.Status != "READY" {
							t.Fatalf("slot %s is %s", sl.Time, sl.Status)
						}
					}
				}
				return n
			}
			for deadline := time.Now().Add(60 * time.Second); running() < total; {
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d slots RUNNING 60 s after the restart\n%s", running(), total, s.stderr)
				}
				if code, body := s.post("/scheduler", now); code != 200 {
					t.Fatalf("step after restart: %d %s", code, body)
				}
			}
			jobs := fake.Jobs()
			if len(jobs) != total {
				t.Errorf("%d Oozie jobs for %d slots", len(jobs), total)
			}
			byName := map[string][]string{}
			for _, j := range jobs {
				name := j.Conf[oozie.WorkflowNameProperty]
				byName[name] = append(byName[name], j.ID)
			}
			recovered := strings.Count(s.stderr.String(), "recovered a job submitted before a crash")
			for i := 0; i < nWorkflows; i++ {
				wf := fmt.Sprintf("w%02d", i)
				for tm, sl := range s.slots(wf, crashT0, crashStepTime()) {
					st, _ := slot.ParseTime(tm)
					ids := byName[oozie.WorkflowName(slot.ID{Workflow: wf, Time: st})]
					if len(ids) != 1 || sl.ExternalID == nil || *sl.ExternalID != ids[0] {
						t.Errorf("%s@%s records %v; Oozie has %v for it", wf, tm, sl.ExternalID, ids)
					}
				}
			}
			t.Logf("%d jobs recovered after the restart", recovered)
			for _, j := range jobs {
				fake.SetStatus(j.ID, ooziefake.Succeeded)
			}
			if code, body := s.post("/scheduler", now); code != 200 {
				t.Fatalf("final step: %d %s", code, body)
			}
			for i := 0; i < nWorkflows; i++ {
				for tm, sl := range s.slots(fmt.Sprintf("w%02d", i), crashT0, crashStepTime()) {
					if sl.Status != "SUCCESS" {
						t.Errorf("w%02d@%s is %s", i, tm, sl.Status)
					}
				}
			}
			s.stop()
			checkStateDB(t, filepath.Join(dir, "db"))
		})
	}
}
