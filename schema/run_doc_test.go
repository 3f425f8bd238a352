package schema

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestAuthoringRunExamplesVet: every CUE project in the section "Run
// constraints, pools, SLAs and notifications" of docs/authoring.md (a
// ```cue block that starts with package) compiles without errors or
// warnings, so the examples cannot rot; the stories about when to run (3,
// 5, 6, 7) each have one.
func TestAuthoringRunExamplesVet(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "authoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "\n## Run constraints, pools, SLAs and notifications\n")
	if start < 0 {
		t.Fatal(`docs/authoring.md has no "## Run constraints, pools, SLAs and notifications" section`)
	}
	section := text[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	block := regexp.MustCompile("(?s)```cue\n(package .*?)```")
	heading := regexp.MustCompile(`(?m)^### (.*)$`)
	blocks := block.FindAllStringSubmatchIndex(section, -1)
	if len(blocks) < 5 {
		t.Fatalf("%d CUE projects in the section, want at least 5", len(blocks))
	}
	stories := map[string]bool{}
	for i, b := range blocks {
		title := "before the first story"
		for _, h := range heading.FindAllStringSubmatchIndex(section[:b[0]], -1) {
			title = section[h[2]:h[3]]
		}
		name := "example" + string(rune('a'+i))
		if m := regexp.MustCompile(`^Story (\d+):`).FindStringSubmatch(title); m != nil {
			stories[m[1]] = true
			name = "story" + m[1]
		}
		src := section[b[2]:b[3]]
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "proj")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "example.cue"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			p, diags, err := Compile(dir)
			for _, d := range diags {
				t.Errorf("%s: %s", title, d)
			}
			if err != nil || p == nil || len(p.Workflows) == 0 {
				t.Fatalf("%s: no project compiled (%v)", title, err)
			}
		})
	}
	for _, n := range []string{"3", "5", "6", "7"} {
		if !stories[n] {
			t.Errorf("story %s has no CUE project in the section", n)
		}
	}
}
