package cluster

import (
	"fmt"
	"testing"
)

func TestOwnerTable(t *testing.T) {
	three := []string{"a", "b", "c"}
	for _, tc := range []struct {
		name string
		wf   string
		live []string
		want string
	}{
		{"no instance", "wf", nil, ""},
		{"one instance", "wf", []string{"only"}, "only"},
		// Golden values: the hash must never change, or instances of two
		// versions would disagree about who steps what.
		{"golden wordcount-nyc", "wordcount-nyc", three, "c"},
		{"golden wf-17", "wf-17", three, "b"},
		{"golden, another order", "wordcount-nyc", []string{"c", "b", "a"}, "c"},
		{"golden wf-17, another order", "wf-17", []string{"c", "a", "b"}, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Owner(tc.wf, tc.live); got != tc.want {
				t.Errorf("Owner(%q, %q) = %q, want %q", tc.wf, tc.live, got, tc.want)
			}
		})
	}
}

func TestScoreGolden(t *testing.T) {
	// Fixed outputs of score: a change here breaks mixed-version clusters.
	for _, tc := range []struct {
		instance, wf string
		want         uint64
	}{
		{"a", "wf", 0xace1f518905864b6},
		{"celos-1", "wordcount-nyc", 0x89608ded3d4017cb},
	} {
		if got := score(tc.instance, tc.wf); got != tc.want {
			t.Errorf("score(%q, %q) = %#x, want %#x", tc.instance, tc.wf, got, tc.want)
		}
	}
	// The separator matters: ("ab", "c") and ("a", "bc") differ.
	if score("ab", "c") == score("a", "bc") {
		t.Error(`score("ab", "c") == score("a", "bc"): the instance/workflow boundary is lost`)
	}
}

func wfNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("wordcount-%05d", i)
	}
	return out
}

func TestOwnerSpreadsEvenly(t *testing.T) {
	live := []string{"celos-1", "celos-2", "celos-3"}
	wfs := wfNames(9000)
	count := map[string]int{}
	for _, wf := range wfs {
		count[Owner(wf, live)]++
	}
	for _, id := range live {
		// 3000 expected each; a fair hash is within a few percent.
		if n := count[id]; n < 2700 || n > 3300 {
			t.Errorf("%s owns %d of 9000 workflows, want 3000±10%%: %v", id, n, count)
		}
	}
}

func TestOwnerMovesOnlyWhatMust(t *testing.T) {
	wfs := wfNames(3000)
	before := []string{"celos-1", "celos-2", "celos-3"}
	joined := append(append([]string(nil), before...), "celos-4")
	left := []string{"celos-1", "celos-3"} // celos-2 left
	moved := 0
	for _, wf := range wfs {
		o, j, l := Owner(wf, before), Owner(wf, joined), Owner(wf, left)
		if j != o {
			moved++
			if j != "celos-4" {
				t.Fatalf("%s moved from %s to %s when celos-4 joined: only moves to the newcomer are allowed", wf, o, j)
			}
		}
		if o != "celos-2" && l != o {
			t.Fatalf("%s moved from %s to %s when celos-2 left: only celos-2's workflows may move", wf, o, l)
		}
	}
	// About a quarter moves to the newcomer.
	if moved < 600 || moved > 900 {
		t.Errorf("%d of 3000 workflows moved to the 4th instance, want about 750", moved)
	}
}
