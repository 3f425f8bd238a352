package faults

import (
	"context"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/ooziefake"
	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/defaults"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/oozie"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema/workflow"
)

// lossMode is how the proxy in front of the fake Oozie treats a job
// submission (POST .../jobs) that Oozie accepted: the job exists, but
// the answer does not reach celos intact.
type lossMode int

const (
	passThrough  lossMode = iota
	answer500             // Oozie's answer replaced by a 500
	answerHTML            // ... by a proxy's HTML error page with 200
	answerLate            // ... delayed past celos's call timeout
	answerCutOff          // the connection is closed without an answer
)

func (m lossMode) String() string {
	return [...]string{"pass-through", "accepted, then 500", "accepted, then garbage", "accepted, then too slow", "accepted, then connection cut"}[m]
}

// lossyProxy forwards everything to Oozie; submissions are forwarded and
// their answer lost as its mode says.
type lossyProxy struct {
	mu   sync.Mutex
	mode lossMode
	rp   *httputil.ReverseProxy
	srv  *httptest.Server
	late time.Duration
}

func newLossyProxy(t *testing.T, target string, late time.Duration) *lossyProxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = ""
	p := &lossyProxy{rp: httputil.NewSingleHostReverseProxy(u), late: late}
	p.rp.ErrorLog = log.New(io.Discard, "", 0)
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *lossyProxy) set(m lossMode) { p.mu.Lock(); p.mode = m; p.mu.Unlock() }

func (p *lossyProxy) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	mode := p.mode
	p.mu.Unlock()
	if mode == passThrough || r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/jobs") {
		p.rp.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	p.rp.ServeHTTP(rec, r) // Oozie creates the job
	switch mode {
	case answer500:
		w.Header().Set("oozie-error-code", "E0603")
		http.Error(w, "Internal Server Error", http.StatusInternalServerError)
	case answerHTML:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "<html><body>502 Bad Gateway</body></html>")
	case answerLate:
		select {
		case <-time.After(p.late):
		case <-r.Context().Done():
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	case answerCutOff:
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
}

// oozieRig is the engine with the oozie service, through the proxy, on a
// real state database.
type oozieRig struct {
	t     *testing.T
	fake  *ooziefake.Server
	proxy *lossyProxy
	eng   *engine.Engine
	db    *statedb.DB
	now   time.Time
	t0    time.Time
}

const oozieSlots = 3

func newOozieRig(t *testing.T) *oozieRig {
	t.Helper()
	fake, err := ooziefake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	fake.SetPlan(func(map[string]string) []string { return []string{ooziefake.Running} }) // until told
	const timeout = 300 * time.Millisecond
	proxy := newLossyProxy(t, fake.URL, 3*timeout)
	dir := t.TempDir()
	t0 := time.Date(2015, 9, 12, 20, 0, 0, 0, time.UTC)
	wc := fixture.Hourly("wc")
	wc.SchedulingStrategy.Concurrency = oozieSlots
	wc.ExternalService = fixture.Oozie(map[string]string{"user.name": "celos", "oozie.wf.application.path": "hdfs:///app/wc"})
	wc.StartTime = t0
	fixture.WriteProject(t, filepath.Join(dir, "wf"), "oz", wc)
	db, err := statedb.Open(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	svc := oozie.NewService(&defaults.Defaults{Oozie: proxy.srv.URL + "/oozie"}, nil, oozie.WithCallTimeout(timeout))
	eng, err := engine.New(engine.Options{
		WorkflowsDir: filepath.Join(dir, "wf"), Store: db,
		Services:    map[string]external.Service{workflow.ServiceOozie: svc},
		Logger:      slog.New(slog.DiscardHandler),
		CallTimeout: 2 * timeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &oozieRig{t: t, fake: fake, proxy: proxy, eng: eng, db: db, t0: t0, now: t0.Add(oozieSlots*time.Hour - 30*time.Minute)}
}

func (r *oozieRig) step() {
	r.t.Helper()
	if err := r.eng.Step(context.Background(), r.now, nil); err != nil {
		r.t.Fatal(err)
	}
}

// statuses returns the slots' statuses, and fails the test on a FAILURE.
func (r *oozieRig) statuses(when string) []slot.State {
	r.t.Helper()
	var out []slot.State
	for i := 0; i < oozieSlots; i++ {
		st, found, err := r.db.Get(slot.ID{Workflow: "wc", Time: r.t0.Add(time.Duration(i) * time.Hour)})
		if err != nil || !found {
			r.t.Fatalf("%s: slot %d: found=%v %v", when, i, found, err)
		}
		if st.Status == slot.Failure || st.Status == slot.WaitTimeout {
			r.t.Fatalf("%s: slot %s is %s", when, st.ID, st.Status)
		}
		out = append(out, st)
	}
	return out
}

func (r *oozieRig) expect(when string, want slot.Status) []slot.State {
	r.t.Helper()
	sts := r.statuses(when)
	for _, st := range sts {
		if st.Status != want {
			r.t.Fatalf("%s: %s is %s, want %s; problems %v", when, st.ID, st.Status, want, r.eng.Problems("wc"))
		}
	}
	return sts
}

// TestOozieFaultsWhileSubmitting: Oozie down, answering 500 or garbage,
// too slow, or accepting a job whose answer is then lost (500, garbage,
// too late, connection cut) while the engine submits. No slot fails, no
// slot is lost, and each slot has exactly one Oozie job: a lost answer
// leaves the submit intent, and the next step finds the job with Recover
// instead of submitting again.
func TestOozieFaultsWhileSubmitting(t *testing.T) {
	type fault struct {
		name  string
		apply func(r *oozieRig)
		// accepted: Oozie holds the jobs although celos got no answer.
		accepted bool
	}
	faults := []fault{
		{"Oozie down", func(r *oozieRig) { r.fake.Down() }, false},
		{"Oozie 500", func(r *oozieRig) { r.fake.SetMode(ooziefake.Error500) }, false},
		{"Oozie garbage", func(r *oozieRig) { r.fake.SetMode(ooziefake.Garbage) }, false},
		{"Oozie safe mode", func(r *oozieRig) { r.fake.SetMode(ooziefake.SafeMode) }, false},
		{"Oozie slow", func(r *oozieRig) { r.fake.SetDelay(2 * time.Second) }, false},
	}
	for _, m := range []lossMode{answer500, answerHTML, answerLate, answerCutOff} {
		faults = append(faults, fault{m.String(), func(r *oozieRig) { r.proxy.set(m) }, true})
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			r := newOozieRig(t)
			r.step()
			r.expect("first step", slot.Ready)

			f.apply(r)
			r.step()
			sts := r.expect("during the fault", slot.Ready)
			if ps := r.eng.Problems("wc"); len(ps) == 0 {
				t.Error("no problem recorded during the fault")
			}
			jobs := len(r.fake.Jobs())
			if f.accepted && jobs != oozieSlots {
				t.Fatalf("%d jobs in Oozie, want %d accepted ones", jobs, oozieSlots)
			}
			if !f.accepted && jobs != 0 {
				t.Fatalf("%d jobs in Oozie during an outage", jobs)
			}
			for _, st := range sts {
				if _, left, _ := r.db.GetIntent(st.ID); f.accepted && !left {
					t.Errorf("%s: no submit intent kept after a lost answer", st.ID)
				}
			}
			// A second step while submissions still fail: an accepted job
			// is found (Recover only reads) and recorded; nothing is
			// submitted again.
			r.step()
			if f.accepted {
				r.expect("second step during the fault", slot.Running)
			} else {
				r.expect("second step during the fault", slot.Ready)
			}

			// Oozie back.
			r.fake.SetMode(ooziefake.Normal)
			r.fake.SetDelay(0)
			if err := r.fake.Up(); err != nil {
				t.Fatal(err)
			}
			r.proxy.set(passThrough)
			r.step()
			sts = r.expect("after the fault", slot.Running)
			jobsNow := r.fake.Jobs()
			if len(jobsNow) != oozieSlots {
				t.Fatalf("%d jobs in Oozie for %d slots: a slot was submitted twice", len(jobsNow), oozieSlots)
			}
			byName := map[string]string{}
			for _, j := range jobsNow {
				byName[j.Conf[oozie.WorkflowNameProperty]] = j.ID
			}
			for _, st := range sts {
				if want := byName[oozie.WorkflowName(st.ID)]; st.ExternalID != want {
					t.Errorf("%s records job %q, Oozie's job for it is %q", st.ID, st.ExternalID, want)
				}
				if _, left, _ := r.db.GetIntent(st.ID); left {
					t.Errorf("%s: submit intent left", st.ID)
				}
			}
			for _, j := range jobsNow {
				r.fake.SetStatus(j.ID, ooziefake.Succeeded)
			}
			r.step()
			r.expect("jobs succeeded", slot.Success)
			if ps := r.eng.Problems("wc"); len(ps) != 0 {
				t.Errorf("problems left: %v", ps)
			}
		})
	}
}

// TestOozieFaultsWhileRunning: the same faults while slots are RUNNING:
// status polls fail, slots stay RUNNING (never FAILURE), and pick up the
// jobs' outcome once Oozie answers again.
func TestOozieFaultsWhileRunning(t *testing.T) {
	for _, f := range []struct {
		name  string
		apply func(r *oozieRig)
	}{
		{"down", func(r *oozieRig) { r.fake.Down() }},
		{"500", func(r *oozieRig) { r.fake.SetMode(ooziefake.Error500) }},
		{"garbage", func(r *oozieRig) { r.fake.SetMode(ooziefake.Garbage) }},
		{"slow", func(r *oozieRig) { r.fake.SetDelay(2 * time.Second) }},
	} {
		t.Run(f.name, func(t *testing.T) {
			r := newOozieRig(t)
			r.step()
			r.step()
			r.expect("submitted", slot.Running)
			for _, j := range r.fake.Jobs() {
				r.fake.SetStatus(j.ID, ooziefake.Succeeded) // finished, unseen
			}
			f.apply(r)
			r.step()
			r.expect("during the fault", slot.Running)
			r.fake.SetMode(ooziefake.Normal)
			r.fake.SetDelay(0)
			if err := r.fake.Up(); err != nil {
				t.Fatal(err)
			}
			r.step()
			r.expect("after the fault", slot.Success)
			if n := len(r.fake.Jobs()); n != oozieSlots {
				t.Errorf("%d jobs", n)
			}
		})
	}
}
