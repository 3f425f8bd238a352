package schema

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestAuthoringStoriesVet: every CUE example of the CDAP user stories in
// docs/authoring.md ("### Story N") is a project that compiles without
// errors or warnings, so the examples cannot rot. The stories about
// triggers must each have one.
func TestAuthoringStoriesVet(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "authoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "\n## Beyond time")
	if start < 0 {
		t.Fatal(`docs/authoring.md has no "## Beyond time" section`)
	}
	section := text[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	heading := regexp.MustCompile(`(?m)^### Story (\d+):`)
	block := regexp.MustCompile("(?s)```cue\n(package .*?)```")
	locs := heading.FindAllStringSubmatchIndex(section, -1)
	found := map[string]int{}
	for i, loc := range locs {
		n := section[loc[2]:loc[3]]
		end := len(section)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		for j, m := range block.FindAllStringSubmatch(section[loc[0]:end], -1) {
			found[n]++
			t.Run("story"+n+"-"+string(rune('a'+j)), func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "proj")
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "story.cue"), []byte(m[1]), 0o644); err != nil {
					t.Fatal(err)
				}
				p, diags, err := Compile(dir)
				for _, d := range diags {
					t.Errorf("story %s: %s", n, d)
				}
				if err != nil || p == nil || len(p.Workflows) == 0 {
					t.Fatalf("story %s: no project compiled (%v)", n, err)
				}
			})
		}
	}
	for _, n := range []string{"3", "4", "5", "7", "8", "9", "10", "11"} {
		if found[n] == 0 {
			t.Errorf("story %s has no CUE example in docs/authoring.md", n)
		}
	}
}
