package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/encoding/yaml"
)

// hook is one entry of a .pre-commit-hooks.yaml or of a
// .pre-commit-config.yaml's hooks list.
type hook struct {
	ID            string `json:"id"`
	Name          string `json:"name"`
	Entry         string `json:"entry"`
	Language      string `json:"language"`
	Files         string `json:"files"`
	PassFilenames *bool  `json:"pass_filenames"`
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := yaml.Extract(path, data)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	v := cuecontext.New().BuildFile(f)
	if err := v.Decode(into); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
}

// TestPreCommitHooks checks the repository's .pre-commit-hooks.yaml the
// way pre-commit uses it: each hook runs `celos vet` (built from this
// module for language golang) in the project directory without file
// names, on .cue changes, and fails the commit exactly when the project is
// invalid. The scaffold's .pre-commit-config.yaml must name those hooks.
func TestPreCommitHooks(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var hooks []hook
	readYAML(t, filepath.Join(root, ".pre-commit-hooks.yaml"), &hooks)
	ids := map[string]bool{}
	for _, h := range hooks {
		t.Run(h.ID, func(t *testing.T) {
			ids[h.ID] = true
			if h.Name == "" {
				t.Errorf("no name")
			}
			if got := strings.Fields(h.Entry); len(got) != 2 || got[0] != "celos" || got[1] != "vet" {
				t.Errorf("entry %q, want celos vet", h.Entry)
			}
			switch h.Language {
			case "golang":
				// pre-commit runs `go install ./...` in the repository: the
				// binary is named after cmd/celos.
				if _, err := os.Stat(filepath.Join(root, "cmd", "celos", "main.go")); err != nil {
					t.Errorf("language golang, but no cmd/celos to install: %v", err)
				}
			case "system":
			default:
				t.Errorf("language %q, want golang or system", h.Language)
			}
			if h.PassFilenames == nil || *h.PassFilenames {
				t.Errorf("pass_filenames must be false: celos vet takes a directory, not files")
			}
			re, err := regexp.Compile(h.Files)
			if err != nil {
				t.Fatalf("files %q: %v", h.Files, err)
			}
			for name, want := range map[string]bool{"workflows.cue": true, "sub/dc.cue": true, "README.md": false, "hdfs/workflow.xml": false} {
				if re.MatchString(name) != want {
					t.Errorf("files %q matches %s: %v, want %v", h.Files, name, !want, want)
				}
			}
		})
	}
	if !ids["celos-vet"] || !ids["celos-vet-system"] {
		t.Fatalf("hooks %v, want celos-vet and celos-vet-system", ids)
	}

	// The entry as pre-commit runs it: in the project, no arguments.
	dir := t.TempDir()
	proj := filepath.Join(dir, "wc")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"init", proj}, &stdout, &stderr); code != ExitOK {
		t.Fatalf("celos init: exit %d: %s", code, stderr.String())
	}
	var config struct {
		Repos []struct {
			Repo  string `json:"repo"`
			Hooks []hook `json:"hooks"`
		} `json:"repos"`
	}
	readYAML(t, filepath.Join(proj, ".pre-commit-config.yaml"), &config)
	used := 0
	for _, r := range config.Repos {
		if r.Repo != "https://github.com/celos-go/celos" {
			continue
		}
		for _, h := range r.Hooks {
			used++
			if !ids[h.ID] {
				t.Errorf("the scaffold's .pre-commit-config.yaml uses hook %q, which .pre-commit-hooks.yaml does not define", h.ID)
			}
		}
	}
	if used == 0 {
		t.Errorf("the scaffold's .pre-commit-config.yaml uses no hook of https://github.com/celos-go/celos")
	}
	t.Chdir(proj)
	entry := strings.Fields(hooks[0].Entry)[1:]
	stdout.Reset()
	stderr.Reset()
	if code := run(entry, &stdout, &stderr); code != ExitOK || stderr.Len() > 0 {
		t.Errorf("hook on the scaffold: exit %d, stderr %q; want 0 and nothing", code, stderr.String())
	}
	if err := os.WriteFile("broken.cue", []byte("package wc\n\nworkflows: x: maxRetryCount: -1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if code := run(entry, &stdout, &stderr); code != ExitFailure || !strings.Contains(stderr.String(), "broken.cue:3:") {
		t.Errorf("hook on a broken project: exit %d, stderr %q; want 1 and broken.cue:3:...", code, stderr.String())
	}
}
