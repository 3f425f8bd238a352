package pool

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Pools
		err  string
	}{
		{"two pools", `{"pools": {"etl": {"limit": 4}, "reports": {"limit": 1}}}`, Pools{"etl": 4, "reports": 1}, ""},
		{"no pools", `{"pools": {}}`, Pools{}, ""},
		{"not an object", `["etl"]`, nil, "must be a JSON object"},
		{"empty", ``, nil, "must be a JSON object"},
		{"no pools field", `{}`, nil, `no "pools" object`},
		{"limit 0", `{"pools": {"etl": {"limit": 0}}}`, nil, `pool "etl": limit 0 must be between 1 and`},
		{"no limit", `{"pools": {"etl": {}}}`, nil, `pool "etl" has no limit`},
		{"bad name", `{"pools": {"a/b": {"limit": 1}}}`, nil, "a pool name must match"},
		{"unknown field", `{"pools": {"etl": {"limit": 1, "size": 2}}}`, nil, `unknown field "size"`},
		{"syntax", "{\"pools\": {\n\"etl\": {\"limit\": 1,}}}", nil, "JSON syntax error at line 2"},
		{"string limit", `{"pools": {"etl": {"limit": "4"}}}`, nil, "wrong type"},
		{"trailing", `{"pools": {}} {}`, nil, "trailing data"},
		// A pool named twice (two edits merged) took the last limit
		// silently: 100 here, where one of them meant 1.
		{"pool twice", "{\"pools\": {\"etl\": {\"limit\": 1},\n \"etl\": {\"limit\": 100}}}", nil, `pool "etl" is defined twice (again at line 2)`},
		{"pools twice", `{"pools": {"etl": {"limit": 1}}, "pools": {"etl": {"limit": 100}}}`, nil, `"pools" is given twice`},
		{"limit twice", `{"pools": {"etl": {"limit": 1, "limit": 100}}}`, nil, `pool "etl": "limit" is given twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("Parse = %v, want ErrInvalid containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("Parse (-want +got):\n%s", d)
			}
		})
	}
}

// A hostile file's content never shows up in the error.
func TestParseDoesNotQuoteTheFile(t *testing.T) {
	secret := "root:$6$secret-hash:19000:0:99999:7:::"
	for _, in := range []string{secret, `{"pools": {"` + secret + `": {"limit": 1}}}`, `{"` + secret + `": 1}`, `{"pools": {"etl": {"limit": "` + secret + `"}}}`} {
		_, err := Parse([]byte(in))
		if err == nil || strings.Contains(err.Error(), "secret-hash") {
			t.Errorf("Parse(%q) = %v: want an error that does not quote the file", in, err)
		}
	}
}

func TestFileReloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pools.json")
	f := NewFile(path)
	if _, _, err := f.Load(); err == nil || err.Error() != "read: no such file or directory" || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"pools": {"etl": {"limit": 2}}}`)
	p, changed, err := f.Load()
	if err != nil || !changed || p["etl"] != 2 {
		t.Fatalf("Load = %v %v %v", p, changed, err)
	}
	if _, changed, _ := f.Load(); changed {
		t.Errorf("unchanged file reported as changed")
	}
	write(`{"pools": {"etl": {"limit": 0}}}`) // bad: the previous version stays
	p, _, err = f.Load()
	if err == nil || p["etl"] != 2 {
		t.Fatalf("bad version: Load = %v %v, want the previous pools and an error", p, err)
	}
	write(`{"pools": {"etl": {"limit": 5}}}`)
	if p, _, err := f.Load(); err != nil || p["etl"] != 5 {
		t.Fatalf("fixed: Load = %v %v", p, err)
	}
	if p, _, err := NewFile("").Load(); p != nil || err != nil {
		t.Errorf("no file: %v %v", p, err)
	}
}

func TestAdmit(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	pools := Pools{"etl": 2}
	cands := []Candidate{
		{Workflow: "low-old", Slot: t0, Pool: "etl", Priority: 0},
		{Workflow: "high-new", Slot: t0.Add(2 * time.Hour), Pool: "etl", Priority: 10},
		{Workflow: "mid", Slot: t0.Add(time.Hour), Pool: "etl", Priority: 5},
		{Workflow: "free", Slot: t0, Pool: ""},
		{Workflow: "lost", Slot: t0, Pool: "nope"},
		{Workflow: "low-new", Slot: t0.Add(time.Hour), Pool: "etl", Priority: 0},
	}
	why, use := Admit(pools, map[string]int{"etl": 0}, cands)
	want := []string{
		`pool "etl" is full: 2 of 2 running, 0 waiting before this slot`,
		"",
		"",
		"",
		`pool "nope" is not defined in the pools file`,
		`pool "etl" is full: 2 of 2 running, 1 waiting before this slot`,
	}
	if d := cmp.Diff(want, why); d != "" {
		t.Errorf("why (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]Use{"etl": {Limit: 2, Admitted: 2, Waiting: 2}}, use); d != "" {
		t.Errorf("use (-want +got):\n%s", d)
	}
	// One already running: only the highest priority goes.
	why, _ = Admit(pools, map[string]int{"etl": 1}, cands)
	if why[1] != "" || why[2] == "" {
		t.Errorf("with one running: %q", why)
	}
	// Over the limit (it was lowered): nothing goes.
	why, use = Admit(pools, map[string]int{"etl": 3}, cands[:3])
	for i, w := range why {
		if w == "" {
			t.Errorf("candidate %d admitted to a pool over its limit", i)
		}
	}
	if use["etl"].Admitted != 0 || use["etl"].Waiting != 3 {
		t.Errorf("use = %+v", use["etl"])
	}
}

// Property: whatever the candidates, no pool ends with more running than
// its limit (unless it already had more), and every admitted slot of a
// pool ranks before every held one (priority, then slot time).
func TestAdmitProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 2026))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	names := []string{"a", "b", "c", "undefined", ""}
	for round := 0; round < 2000; round++ {
		pools := Pools{"a": 1 + r.IntN(3), "b": 1 + r.IntN(5), "c": 1}
		running := map[string]int{"a": r.IntN(4), "b": r.IntN(3), "c": r.IntN(2)}
		cands := make([]Candidate, r.IntN(20))
		for i := range cands {
			cands[i] = Candidate{Workflow: fmt.Sprintf("wf%d", r.IntN(6)), Slot: t0.Add(time.Duration(r.IntN(10)) * time.Hour),
				Pool: names[r.IntN(len(names))], Priority: r.IntN(3)}
		}
		why, use := Admit(pools, running, cands)
		admitted := map[string]int{}
		for i, c := range cands {
			if why[i] == "" {
				admitted[c.Pool]++
				if c.Pool == "undefined" {
					t.Fatalf("round %d: a slot of an undefined pool was admitted", round)
				}
			} else if c.Pool == "" {
				t.Fatalf("round %d: a slot of no pool was held: %s", round, why[i])
			}
		}
		for name, limit := range pools {
			if admitted[name] > 0 && running[name]+admitted[name] > limit {
				t.Fatalf("round %d: pool %s: %d running + %d admitted > limit %d", round, name, running[name], admitted[name], limit)
			}
			if admitted[name] != use[name].Admitted {
				t.Fatalf("round %d: use %+v, counted %d admitted", round, use[name], admitted[name])
			}
			// A free place is never left while a candidate waits.
			if use[name].Waiting > 0 && running[name]+admitted[name] < limit {
				t.Fatalf("round %d: pool %s holds slots with a free place", round, name)
			}
		}
		for i, ci := range cands {
			for j, cj := range cands {
				if ci.Pool != cj.Pool || ci.Pool == "" || why[i] != "" || why[j] == "" {
					continue
				}
				if cj.Priority > ci.Priority || (cj.Priority == ci.Priority && cj.Slot.Before(ci.Slot)) {
					t.Fatalf("round %d: held %+v ranks before admitted %+v", round, cj, ci)
				}
			}
		}
	}
}

// A pools file that is a FIFO or a directory is an error naming it, at
// once (no read blocks on a FIFO with no writer).
func TestFileNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pools.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, _, err := NewFile(fifo).Load(); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("FIFO: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Load of a FIFO blocked")
	}
	if _, _, err := NewFile(dir).Load(); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
}

// TestBefore: the order of a pool (the engine ranks the submit intents it
// gives the store by it): priority, then slot time, then workflow id.
func TestBefore(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	order := []Candidate{
		{Workflow: "b", Slot: t0.Add(time.Hour), Priority: 5},
		{Workflow: "a", Slot: t0, Priority: 0},
		{Workflow: "b", Slot: t0, Priority: 0},
		{Workflow: "a", Slot: t0.Add(time.Hour), Priority: 0},
	}
	for i := range order {
		for j := range order {
			if got, want := Before(order[i], order[j]), i < j; got != want {
				t.Errorf("Before(%+v, %+v) = %v, want %v", order[i], order[j], got, want)
			}
		}
	}
}
