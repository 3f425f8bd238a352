package ui

import (
	"strings"
	"testing"
)

// TestFooterNamesInstance: with several instances on one database the
// grid's status line and the other pages' footer say which instance
// served the page; with one, they say nothing of it.
func TestFooterNamesInstance(t *testing.T) {
	h := newTestHandler(t, demoService(), Options{Version: "1.2", Instance: "celos-2"})
	grid := wantStatus(t, get(t, h, "/ui"), 200)
	if !strings.Contains(grid, " · celos 1.2 · instance celos-2</span></div>") {
		t.Error("the grid's status line does not name the instance")
	}
	wf := wantStatus(t, get(t, h, "/ui/workflow?id="+demoService().WorkflowIDs()[0]), 200)
	if !strings.Contains(wf, `<footer class="foot">celos 1.2 · instance celos-2 · all times UTC</footer>`) {
		t.Error("the workflow page's footer does not name the instance")
	}
	h = newTestHandler(t, demoService(), Options{Version: "1.2"})
	if page := wantStatus(t, get(t, h, "/ui"), 200); strings.Contains(page, "instance celos") {
		t.Error("a single instance's page names an instance")
	}
}
