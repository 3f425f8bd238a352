package faults

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
)

// problemsVia returns the problems of workflow wf that instance id shows
// (GET /workflow-slots).
func (r *clusterRig) problemsVia(id, wf string) []scheduler.Problem {
	r.t.Helper()
	q := url.Values{"id": {wf}, "end": {clT0.Add(clHours * time.Hour).Format(time.RFC3339)}}
	resp, err := http.Get(r.members[id].URL + "/workflow-slots?" + q.Encode())
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Problems []scheduler.Problem `json:"problems"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		r.t.Fatalf("workflow-slots %s on %s: %d %v", wf, id, resp.StatusCode, err)
	}
	return out.Problems
}

// waitProblems waits until instance id shows problems of wf for which ok
// holds, without a step on it: its store's refresh (every lease/3) is
// what brings them. The deadline is generous (a loaded 2-core machine).
func (r *clusterRig) waitProblems(id, wf, what string, ok func([]scheduler.Problem) bool) time.Duration {
	r.t.Helper()
	start := time.Now()
	deadline := start.Add(20 * clLease)
	for {
		ps := r.problemsVia(id, wf)
		if ok(ps) {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("instance %s does not show %s of %s within %s: %+v", id, what, wf, 20*clLease, ps)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func submitProblems(ps []scheduler.Problem) bool {
	for _, p := range ps {
		if p.Op == "submit" && strings.Contains(p.Error, "E0307") {
			return true
		}
	}
	return false
}

func noProblems(ps []scheduler.Problem) bool { return len(ps) == 0 }

// TestClusterProblemsOnEveryInstance: three `celos server` processes; the
// submissions of every workflow fail (Oozie E0307). The problems the owner
// of w00 meets are shown by an instance that does not own it (its
// /workflow-slots, without a step there), and go from both once the
// submissions work. Then the owner is killed with its problems shown;
// the instance that takes w00 over replaces them with its own, and
// clears them when the submissions work again.
func TestClusterProblemsOnEveryInstance(t *testing.T) {
	r := newClusterRig(t)
	owner := r.startThree()
	fail := func(string) error { return errors.New("no application") }
	r.fake.SetCheckApp(fail)
	r.stepAll("a", "b", "c") // READY
	r.stepAll("a", "b", "c") // not submitted
	x := owner["w00"]
	if !submitProblems(r.problemsVia(x, "w00")) {
		t.Fatalf("the owner %s shows no submit problem of w00: %+v", x, r.problemsVia(x, "w00"))
	}
	n := others(x)[0]
	took := r.waitProblems(n, "w00", "the owner's submit problems", submitProblems)
	t.Logf("%s shows %s's problems of w00 %s after its step (lease %s)", n, x, took.Round(time.Millisecond), clLease)

	r.fake.SetCheckApp(nil)
	r.stepAll("a", "b", "c")
	r.waitProblems(x, "w00", "no problems (owner)", noProblems)
	r.waitProblems(n, "w00", "no problems", noProblems)

	// A take-over: every slot SUCCESS, w00's first rerun through n and
	// not submitted by its owner, whose problem every instance shows;
	// the owner dies. The new owner meets the same problem, and clears
	// it once its submission works: the dead owner's set is replaced.
	r.finish("a", "b", "c")
	r.fake.SetCheckApp(fail)
	if code, body := r.members[n].post("/rerun", url.Values{"id": {"w00"}, "time": {slot.FormatTime(clT0)}}); code != 200 {
		t.Fatalf("rerun through %s: %d %s", n, code, body)
	}
	r.stepAll("a", "b", "c") // READY
	r.stepAll("a", "b", "c") // not submitted
	for _, id := range []string{"a", "b", "c"} {
		r.waitProblems(id, "w00", "the owner's submit problem of the rerun", submitProblems)
	}
	r.members[x].kill9()
	rest := others(x)
	r.waitSettled(4*clLease, rest...)
	r.stepAll(rest...)
	for _, id := range rest {
		r.waitProblems(id, "w00", "the submit problem after the take-over", submitProblems)
	}
	r.fake.SetCheckApp(nil)
	r.stepAll(rest...)
	for _, id := range rest {
		r.waitProblems(id, "w00", "no problems once the new owner submitted", noProblems)
	}
	if got := r.members[rest[0]].slots("w00", clT0, clT0.Add(time.Hour))[slot.FormatTime(clT0)].Status; got != "RUNNING" {
		t.Fatalf("w00@%s after the new owner's step: %s, want RUNNING", slot.FormatTime(clT0), got)
	}
}
