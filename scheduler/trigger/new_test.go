package trigger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

func i64(n int64) *int64 { return &n }

// history is States with Range (sinceLast), counting its reads.
type history struct {
	states
	ranges atomic.Int64
}

func (h *history) Range(wf string, start, end time.Time) ([]slot.State, error) {
	h.ranges.Add(1)
	if wf == "broken" {
		return nil, errors.New("corrupt state file")
	}
	var out []slot.State
	for id, st := range h.states {
		if id.Workflow == wf && !id.Time.Before(start) && id.Time.Before(end) {
			st.ID = id
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID.Time.Before(out[j].ID.Time) })
	return out, nil
}

// regs is Registers in memory, counting its listings.
type regs struct {
	buckets map[string][]string
	calls   atomic.Int64
}

func (r *regs) RegisterKeys(bucket, prefix string) ([]string, error) {
	r.calls.Add(1)
	if bucket == "broken" {
		return nil, errors.New("state database: permission denied")
	}
	var out []string
	for _, k := range r.buckets[bucket] {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out, nil
}

// countingLocal is Local counting its listings.
type countingLocal struct {
	Local
	lists atomic.Int64
}

func (c *countingLocal) List(ctx context.Context, fsURI, dir string) ([]Entry, error) {
	c.lists.Add(1)
	return c.Local.List(ctx, fsURI, dir)
}

func writeFile(t *testing.T, name string, size int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
}

func dataVolume(p string, files, bytes int64) workflow.Trigger {
	return workflow.Trigger{Type: workflow.TriggerDataVolume, Path: p, FS: "file:///", MinFiles: i64(files), MinBytes: i64(bytes)}
}

// TestDataVolumeOnLocalFiles: count and size of the matching files on
// file:, hidden files and directories left out, the count and bytes in the
// status.
func TestDataVolumeOnLocalFiles(t *testing.T) {
	root := t.TempDir()
	day := filepath.Join(root, "in", "2014-01-01", "05")
	writeFile(t, filepath.Join(day, "part-0"), 600)
	writeFile(t, filepath.Join(day, "part-1"), 500)
	writeFile(t, filepath.Join(day, "_SUCCESS"), 0)
	writeFile(t, filepath.Join(day, ".part-0.crc"), 12)
	writeFile(t, filepath.Join(day, "other"), 5000)
	writeFile(t, filepath.Join(day, "part-dir", "x"), 5000) // a directory does not count
	glob := filepath.ToSlash(root) + "/in/${year}-${month}-${day}/${hour}/part-*"
	env := Env{FS: NewMux("")}
	tests := []struct {
		name         string
		trig         workflow.Trigger
		ready        bool
		files, bytes int64
		desc         string
	}{
		{"two files", dataVolume(glob, 2, 0), true, 2, 1100, "2 files, 1100 bytes (1.10 kB) match " + filepath.ToSlash(day) + "/part-*: ready (need 2 files)"},
		{"three files", dataVolume(glob, 3, 0), false, 2, 1100, "2 files, 1100 bytes (1.10 kB) match " + filepath.ToSlash(day) + "/part-*: not ready (need 3 files)"},
		{"bytes", dataVolume(glob, 1, 1100), true, 2, 1100, ""},
		{"too few bytes", dataVolume(glob, 1, 1101), false, 2, 1100, ""},
		{"both needed", dataVolume(glob, 3, 10), false, 2, 1100, ""},
		{"hidden named", dataVolume(filepath.ToSlash(root)+"/in/${year}-${month}-${day}/${hour}/_SUCCESS", 1, 0), true, 1, 0, ""},
		{"missing directory", dataVolume(filepath.ToSlash(root)+"/in/${year}/none/*", 1, 0), false, 0, 0, ""},
		{"nothing needed", dataVolume(filepath.ToSlash(root)+"/in/${year}/none/*", 0, 0), true, 0, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := Evaluate(context.Background(), env, &tt.trig, slotTime, slotTime)
			if st.Error != "" || st.Ready != tt.ready || st.Type != TypeDataVolume {
				t.Fatalf("status %+v, want ready=%v", st, tt.ready)
			}
			if st.Files == nil || st.Bytes == nil || *st.Files != tt.files || *st.Bytes != tt.bytes {
				t.Fatalf("files/bytes %v/%v, want %d/%d", st.Files, st.Bytes, tt.files, tt.bytes)
			}
			if tt.desc != "" && st.Description != tt.desc {
				t.Errorf("description %q, want %q", st.Description, tt.desc)
			}
			b, _ := json.Marshal(st)
			if !strings.Contains(string(b), `"files":`) || !strings.Contains(string(b), `"bytes":`) {
				t.Errorf("JSON %s lacks files and bytes", b)
			}
		})
	}
}

// TestDataVolumeErrors: a file system that cannot list, an unreadable
// directory, a bad URI: not ready, with the error.
func TestDataVolumeErrors(t *testing.T) {
	// A name longer than the system allows: unreadable, also for root.
	long := "/tmp/" + strings.Repeat("x", 300)
	for _, tt := range []struct {
		name string
		env  Env
		trig workflow.Trigger
		want string
	}{
		{"no file system", Env{}, dataVolume("/in/*", 1, 0), "no file system"},
		{"exists only", Env{FS: &fakeFS{}}, dataVolume("/in/*", 1, 0), "no file system configured for dataVolume"},
		{"scheme without listing", Env{FS: func() *Mux { m := NewMux(""); m.Handle("hdfs", &fakeFS{}); return m }()},
			workflow.Trigger{Type: workflow.TriggerDataVolume, Path: "/in/*", FS: "hdfs://nn", MinFiles: i64(1), MinBytes: i64(0)}, "cannot list directories"},
		{"remote file URI", Env{FS: NewMux("")}, workflow.Trigger{Type: workflow.TriggerDataVolume, Path: "/in/*", FS: "file://otherhost/", MinFiles: i64(1), MinBytes: i64(0)}, "not a local file: URI"},
		{"unreadable", Env{FS: NewMux("")}, dataVolume(long+"/part-*", 1, 0), "file name too long"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := Evaluate(context.Background(), tt.env, &tt.trig, slotTime, slotTime)
			if st.Ready || !strings.Contains(st.Error, tt.want) {
				t.Fatalf("status %+v, want not ready with an error containing %q", st, tt.want)
			}
			if st.Files != nil {
				t.Errorf("files %d reported for a listing that failed", *st.Files)
			}
		})
	}
}

// TestStepEnvListsEachDirectoryOnce: however many slots, triggers and
// workflows ask, a step's Env lists each distinct directory once (two
// globs of one directory share the listing), reads each register bucket
// once and each workflow's history once.
func TestStepEnvListsEachDirectoryOnce(t *testing.T) {
	root := filepath.ToSlash(t.TempDir())
	for h := 0; h < 3; h++ {
		writeFile(t, filepath.Join(root, "in", fmt.Sprintf("20140101%02d", 5+h), "part-0"), 10)
	}
	cl := &countingLocal{}
	mux := NewMux("")
	mux.Handle("file", cl)
	hist := &history{states: states{{Workflow: "up", Time: slotTime.Add(-5 * time.Hour)}: {Status: slot.Success}}}
	rg := &regs{buckets: map[string][]string{"ingest": {"k-05"}}}
	env := NewStepEnv(hist, mux, rg)
	trig := workflow.Trigger{Type: workflow.TriggerAnd, Triggers: []workflow.Trigger{
		dataVolume(root+"/in/${year}${month}${day}${hour}/part-*", 1, 0),
		dataVolume(root+"/in/${year}${month}${day}${hour}/*", 1, 5),
		{Type: workflow.TriggerSinceLast, Workflow: "up", Seconds: 3600},
		{Type: workflow.TriggerEvent, Bucket: "ingest", Key: "k-${hour}"},
	}}
	for wf := 0; wf < 50; wf++ { // 50 workflows with the same trigger
		for h := 0; h < 3; h++ { // 3 slots each
			Evaluate(context.Background(), env, &trig, slotTime.Add(time.Duration(h)*time.Hour), slotTime)
		}
	}
	if got := cl.lists.Load(); got != 3 {
		t.Errorf("%d listings, want 3 (one per distinct directory)", got)
	}
	if got := hist.ranges.Load(); got != 1 {
		t.Errorf("%d history reads, want 1", got)
	}
	if got := rg.calls.Load(); got != 1 {
		t.Errorf("%d register listings, want 1", got)
	}
	st := Evaluate(context.Background(), env, &trig, slotTime, slotTime)
	if !st.Ready {
		t.Errorf("slot 05: %+v", st)
	}
	// Without the step's memory every evaluation asks again.
	plain := Env{States: hist, FS: mux, Registers: rg}
	Evaluate(context.Background(), plain, &trig, slotTime, slotTime)
	Evaluate(context.Background(), plain, &trig, slotTime, slotTime)
	if got := cl.lists.Load(); got != 3+4 {
		t.Errorf("%d listings after two plain evaluations, want 7", got)
	}
}

// TestFailureTrigger: ready on FAILURE and WAIT_TIMEOUT only.
func TestFailureTrigger(t *testing.T) {
	sts := states{}
	for i, s := range []slot.Status{slot.Failure, slot.WaitTimeout, slot.Success, slot.Running, slot.Killed, slot.Waiting} {
		sts[slot.ID{Workflow: "a", Time: slotTime.Add(time.Duration(i) * time.Hour)}] = slot.State{Status: s}
	}
	fail := workflow.Trigger{Type: workflow.TriggerFailure, Workflow: "a"}
	want := []bool{true, true, false, false, false, false, false}
	for i, w := range want {
		st := Evaluate(context.Background(), Env{States: sts}, &fail, slotTime.Add(time.Duration(i)*time.Hour), slotTime)
		if st.Ready != w || st.Error != "" || st.Type != TypeFailure {
			t.Errorf("slot %d: %+v, want ready=%v", i, st, w)
		}
	}
	st := Evaluate(context.Background(), Env{States: sts}, &fail, slotTime, slotTime)
	if st.Description != "Workflow slot a@2014-01-01T05:00:00.000Z is FAILURE" {
		t.Errorf("description %q", st.Description)
	}
	st = Evaluate(context.Background(), Env{States: sts}, &fail, slotTime.Add(6*time.Hour), slotTime)
	if st.Description != "Workflow slot a@2014-01-01T11:00:00.000Z has not failed: it has no record" {
		t.Errorf("description %q", st.Description)
	}
	bad := workflow.Trigger{Type: workflow.TriggerFailure, Workflow: "broken"}
	if st := Evaluate(context.Background(), Env{States: sts}, &bad, slotTime, slotTime); st.Ready || !strings.Contains(st.Error, "corrupt") {
		t.Errorf("broken: %+v", st)
	}
	// "B after A succeeds, C when A fails": exactly one of them is ready.
	succ := workflow.Trigger{Type: workflow.TriggerSuccess, Workflow: "a"}
	for i := 0; i < 3; i++ {
		at := slotTime.Add(time.Duration(i) * time.Hour)
		b, _ := Ready(context.Background(), Env{States: sts}, &succ, at, at)
		c, _ := Ready(context.Background(), Env{States: sts}, &fail, at, at)
		if b == c {
			t.Errorf("slot %d: success %v, failure %v", i, b, c)
		}
	}
}

// TestSinceLast: the slot's time against the last SUCCESS at or before it,
// in UTC and across DST changes of a zoned daily schedule, where calendar
// days are 23 and 25 hours long.
func TestSinceLast(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string, loc *time.Location) time.Time {
		tt, err := time.ParseInLocation("2006-01-02T15:04", s, loc)
		if err != nil {
			t.Fatal(err)
		}
		return tt.UTC()
	}
	tests := []struct {
		name    string
		success []time.Time
		slot    time.Time
		seconds int64
		ready   bool
		desc    string
	}{
		{"no success yet", nil, at("2024-01-01T10:00", time.UTC), 4 * 3600, true, "Ready, workflow wf has no successful slot at or before 2024-01-01T10:00:00.000Z"},
		{"4h exactly", []time.Time{at("2024-01-01T06:00", time.UTC)}, at("2024-01-01T10:00", time.UTC), 4 * 3600, true, ""},
		{"3h", []time.Time{at("2024-01-01T07:00", time.UTC)}, at("2024-01-01T10:00", time.UTC), 4 * 3600, false,
			"Not ready, only 3h0m0s since the last successful slot of wf (2024-01-01T07:00:00.000Z); ready from slot 2024-01-01T11:00:00.000Z"},
		{"a later success does not count", []time.Time{at("2024-01-01T02:00", time.UTC), at("2024-01-01T11:00", time.UTC)}, at("2024-01-01T10:00", time.UTC), 4 * 3600, true, ""},
		{"the slot's own success counts", []time.Time{at("2024-01-01T10:00", time.UTC)}, at("2024-01-01T10:00", time.UTC), 60, false, ""},
		// DST rows: a daily 00:00 New York schedule; 24h apart in UTC is
		// not one calendar day across a change.
		{"spring forward: 23h day", []time.Time{at("2024-03-10T00:00", ny)}, at("2024-03-11T00:00", ny), 24 * 3600, false, ""},
		{"spring forward: 23h is enough", []time.Time{at("2024-03-10T00:00", ny)}, at("2024-03-11T00:00", ny), 23 * 3600, true, ""},
		{"fall back: 25h day", []time.Time{at("2024-11-03T00:00", ny)}, at("2024-11-04T00:00", ny), 25 * 3600, true, ""},
		{"fall back: 26h is not", []time.Time{at("2024-11-03T00:00", ny)}, at("2024-11-04T00:00", ny), 26 * 3600, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &history{states: states{}}
			for _, s := range tt.success {
				h.states[slot.ID{Workflow: "wf", Time: s}] = slot.State{Status: slot.Success}
				h.states[slot.ID{Workflow: "wf", Time: s.Add(-time.Minute)}] = slot.State{Status: slot.Failure}
			}
			trig := workflow.Trigger{Type: workflow.TriggerSinceLast, Workflow: "wf", Seconds: tt.seconds}
			for _, env := range []Env{{States: h}, NewStepEnv(h, nil, nil)} {
				st := Evaluate(context.Background(), env, &trig, tt.slot, tt.slot.Add(time.Hour))
				if st.Ready != tt.ready || st.Error != "" || st.Type != TypeSinceLast {
					t.Fatalf("%+v, want ready=%v", st, tt.ready)
				}
				if tt.desc != "" && st.Description != tt.desc {
					t.Errorf("description %q, want %q", st.Description, tt.desc)
				}
			}
		})
	}
	trig := workflow.Trigger{Type: workflow.TriggerSinceLast, Workflow: "broken", Seconds: 60}
	if st := Evaluate(context.Background(), Env{States: &history{states: states{}}}, &trig, slotTime, slotTime); st.Ready || !strings.Contains(st.Error, "corrupt") {
		t.Errorf("broken history: %+v", st)
	}
	if st := Evaluate(context.Background(), Env{States: states{}}, &trig, slotTime, slotTime); st.Ready || !strings.Contains(st.Error, "cannot list") {
		t.Errorf("store without Range: %+v", st)
	}
}

// TestEventTrigger: a register key with slot-time tokens (expanded in UTC,
// also for a slot of a zoned schedule across a DST change).
func TestEventTrigger(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	// 2024-03-10 03:00 EDT is 07:00Z (the day of the change).
	slotNY := time.Date(2024, 3, 10, 3, 0, 0, 0, ny)
	rg := &regs{buckets: map[string][]string{"ingest": {"clicks-2014010105", "clicks-20240310T07"}}}
	ev := func(bucket, key string) workflow.Trigger {
		return workflow.Trigger{Type: workflow.TriggerEvent, Bucket: bucket, Key: key}
	}
	for _, tt := range []struct {
		name  string
		trig  workflow.Trigger
		at    time.Time
		ready bool
		desc  string
		err   string
	}{
		{"exists", ev("ingest", "clicks-${year}${month}${day}${hour}"), slotTime, true, "Register ingest/clicks-2014010105 exists", ""},
		{"missing", ev("ingest", "clicks-${year}${month}${day}${hour}"), slotTime.Add(time.Hour), false, "Register ingest/clicks-2014010106 does not exist", ""},
		{"no bucket", ev("none", "k"), slotTime, false, "Register none/k does not exist", ""},
		{"DST day, UTC fields", ev("ingest", "clicks-${year}${month}${day}T${hour}"), slotNY, true, "Register ingest/clicks-20240310T07 exists", ""},
		{"unreadable", ev("broken", "k"), slotTime, false, "", "permission denied"},
		{"not under offset", workflow.Trigger{Type: workflow.TriggerNot, Trigger: ptr(workflow.Trigger{Type: workflow.TriggerOffset, Seconds: 3600,
			Trigger: ptr(ev("ingest", "clicks-${year}${month}${day}${hour}"))})}, slotTime.Add(-time.Hour), false, "Not ready, nested trigger is ready", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := Evaluate(context.Background(), Env{Registers: rg}, &tt.trig, tt.at, tt.at)
			if st.Ready != tt.ready || !strings.Contains(st.Error, tt.err) || (tt.err == "") != (st.Error == "") {
				t.Fatalf("%+v, want ready=%v error %q", st, tt.ready, tt.err)
			}
			if tt.desc != "" && st.Description != tt.desc {
				t.Errorf("description %q, want %q", st.Description, tt.desc)
			}
		})
	}
	trig := ev("ingest", "k")
	if st := Evaluate(context.Background(), Env{}, &trig, slotTime, slotTime); !strings.Contains(st.Error, "no registers") {
		t.Errorf("no registers: %+v", st)
	}
}

// TestNewTriggersCompose: "at least every 4 hours, sooner on 100 GB" is
// or(sinceLast 4h, dataVolume 100GB); an error in one child does not make
// the or ready, nor the not.
func TestNewTriggersCompose(t *testing.T) {
	root := filepath.ToSlash(t.TempDir())
	writeFile(t, root+"/in/20140101/part-0", 1000)
	h := &history{states: states{{Workflow: "wf", Time: slotTime.Add(-2 * time.Hour)}: {Status: slot.Success}}}
	env := Env{States: h, FS: NewMux("")}
	burst := func(bytes int64) workflow.Trigger {
		return workflow.Trigger{Type: workflow.TriggerOr, Triggers: []workflow.Trigger{
			{Type: workflow.TriggerSinceLast, Workflow: "wf", Seconds: 4 * 3600},
			dataVolume(root+"/in/${year}${month}${day}/*", 1, bytes),
		}}
	}
	small, big := burst(1000), burst(1001)
	if st := Evaluate(context.Background(), env, &small, slotTime, slotTime); !st.Ready {
		t.Errorf("enough data 2h after the last run: %+v", st)
	}
	if st := Evaluate(context.Background(), env, &big, slotTime, slotTime); st.Ready {
		t.Errorf("not enough data 2h after the last run: %+v", st)
	}
	if st := Evaluate(context.Background(), env, &big, slotTime.Add(2*time.Hour), slotTime); !st.Ready {
		t.Errorf("4h after the last run: %+v", st)
	}
	st := Evaluate(context.Background(), env, &big, slotTime, slotTime)
	want := []string{TypeSinceLast, TypeDataVolume}
	var got []string
	for _, s := range st.SubStatuses {
		got = append(got, s.Type)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("sub-statuses (-want +got):\n%s", d)
	}
	broken := workflow.Trigger{Type: workflow.TriggerNot, Trigger: ptr(workflow.Trigger{Type: workflow.TriggerFailure, Workflow: "broken"})}
	if st := Evaluate(context.Background(), Env{States: h}, &broken, slotTime, slotTime); st.Ready || st.Error == "" {
		t.Errorf("not of an unreadable failure trigger: %+v", st)
	}
}

// TestDataVolumeTokensAcrossDST: the slot-time tokens of a glob are the
// slot's UTC fields, so the two slots of the repeated hour of a zoned
// hourly schedule (01:00 EDT and 01:00 EST on 3 November 2024) look at
// two directories, and the slot after the spring-forward gap at its own.
func TestDataVolumeTokensAcrossDST(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.ToSlash(t.TempDir())
	writeFile(t, root+"/in/2024110305/part-0", 100) // 01:00 EDT
	writeFile(t, root+"/in/2024110306/part-0", 100) // 01:00 EST
	writeFile(t, root+"/in/2024110306/part-1", 100)
	writeFile(t, root+"/in/2024031007/part-0", 100) // 03:00 EDT, after the gap
	trig := dataVolume(root+"/in/${year}${month}${day}${hour}/part-*", 1, 0)
	edt := time.Date(2024, 11, 3, 1, 0, 0, 0, ny)
	est := edt.Add(time.Hour) // the same wall time, an hour later
	gap := time.Date(2024, 3, 10, 3, 0, 0, 0, ny)
	for _, tc := range []struct {
		at    time.Time
		files int64
	}{{edt, 1}, {est, 2}, {gap, 1}, {gap.Add(-time.Hour), 0}} {
		st := Evaluate(context.Background(), Env{FS: NewMux("")}, &trig, tc.at, tc.at)
		if st.Error != "" || st.Files == nil || *st.Files != tc.files {
			t.Errorf("slot %s (%s): %+v, want %d files", tc.at.UTC().Format(time.RFC3339), tc.at.Format("15:04 MST"), st, tc.files)
		}
	}
}

func TestBytesText(t *testing.T) {
	for n, want := range map[int64]string{
		0:               "0 bytes",
		999:             "999 bytes",
		1000:            "1000 bytes (1.00 kB)",
		4000:            "4000 bytes (4.00 kB)",
		15_500:          "15500 bytes (15.5 kB)",
		999_999:         "999999 bytes (1.00 MB)",
		524_288_000:     "524288000 bytes (524 MB)",
		100_000_000_000: "100000000000 bytes (100 GB)",
		1<<63 - 1:       "9223372036854775807 bytes (9.22 EB)",
	} {
		if got := bytesText(n); got != want {
			t.Errorf("bytesText(%d) = %q, want %q", n, got, want)
		}
	}
}
