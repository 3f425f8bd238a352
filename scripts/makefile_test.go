// Package scripts tests the Makefile's user-settable variables: a user
// sets them from the environment (`PORT=9090 make run`) as well as on
// make's command line.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// needMake fails (CI) or skips the test when make is missing.
func needMake(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("make is missing: %v", err)
		}
		t.Skipf("make is missing: %v", err)
	}
}

// makeN runs `make -n args...` in the repository with env as the
// environment, and returns what make would run.
func makeN(t *testing.T, env []string, args ...string) string {
	t.Helper()
	needMake(t)
	cmd := exec.Command("make", append([]string{"-n"}, args...)...)
	cmd.Dir = ".."
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n %s with %q: %v\n%s", args, env, err, out)
	}
	return string(out)
}

// cleanEnv is the environment without the Makefile's variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "PORT", "VAR", "PKGS", "FUZZTIME", "VERSION", "GO", "BIN", "LDFLAGS", "MAKEFLAGS":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// TestMakeVariablesFromTheEnvironment: every variable the README and the
// Makefile offer a user reaches the commands when set in the
// environment (VAR used to be ignored: the demo's state went to ./var).
func TestMakeVariablesFromTheEnvironment(t *testing.T) {
	for _, c := range []struct{ target, env, want string }{
		{"run", "PORT=9191", "./scripts/run-demo.sh bin/celos 9191 var\n"},
		{"run", "VAR=/tmp/elsewhere/var", "./scripts/run-demo.sh bin/celos 8080 /tmp/elsewhere/var\n"},
		{"test-go", "PKGS=./scheduler/ui", "go test -count=1 -timeout 20m ./scheduler/ui\n"},
		{"fuzz", "FUZZTIME=3s", "./scripts/fuzz.sh 3s\n"},
		{"build", "VERSION=v9.9.9", "-X github.com/celos-go/celos/cmd/celos/cmd.Version=v9.9.9\""},
		{"build", "GO=/opt/go/bin/go", "/opt/go/bin/go build "},
	} {
		if got := makeN(t, append(cleanEnv(), c.env), c.target); !strings.Contains(got, c.want) {
			t.Errorf("%s make -n %s:\n%s\nwant it to contain %q", c.env, c.target, got, c.want)
		}
	}
}

// TestMakeDefaults: unset, the variables have the README's defaults.
func TestMakeDefaults(t *testing.T) {
	out := makeN(t, cleanEnv(), "run", "test-go", "fuzz")
	for _, want := range []string{"-o bin/celos ./cmd/celos\n", "./scripts/run-demo.sh bin/celos 8080 var\n", "go test -count=1 -timeout 20m ./...\n", "./scripts/fuzz.sh 10s\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("make -n run test-go fuzz:\n%s\nwant it to contain %q", out, want)
		}
	}
}

// TestMakeIgnoresBINAndLDFLAGSFromTheEnvironment: an environment's BIN (a
// directory of one's own) or LDFLAGS (a C toolchain's) do not change the
// build; on make's command line they do.
func TestMakeIgnoresBINAndLDFLAGSFromTheEnvironment(t *testing.T) {
	got := makeN(t, append(cleanEnv(), "BIN=/home/someone/bin", "LDFLAGS=-L/usr/local/lib"), "build")
	if !strings.Contains(got, "-o bin/celos ./cmd/celos") || strings.Contains(got, "/usr/local/lib") {
		t.Errorf("BIN and LDFLAGS in the environment changed the build:\n%s", got)
	}
	if got := makeN(t, cleanEnv(), "build", "BIN=/tmp/celos-bin"); !strings.Contains(got, "-o /tmp/celos-bin ./cmd/celos") {
		t.Errorf("BIN on make's command line did not change the build:\n%s", got)
	}
}

// TestMakeCleanRemovesOnlyTheDemosVAR: VAR may come from the environment,
// so `make clean` removes it only if it is the demo's state directory (a
// directory named var), and leaves any other directory alone.
func TestMakeCleanRemovesOnlyTheDemosVAR(t *testing.T) {
	needMake(t)
	mk, err := filepath.Abs("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	keep, demo := filepath.Join(work, "precious"), filepath.Join(work, "demo", "var")
	for _, d := range []string{keep, demo, filepath.Join(work, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		dir  string
		gone bool
	}{{keep, false}, {demo, true}} {
		cmd := exec.Command("make", "-f", mk, "clean")
		cmd.Dir = work // its bin/, not the repository's
		cmd.Env = append(cleanEnv(), "VAR="+c.dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("VAR=%s make clean: %v\n%s", c.dir, err, out)
		}
		_, serr := os.Stat(filepath.Join(c.dir, "f"))
		if gone := os.IsNotExist(serr); gone != c.gone {
			t.Errorf("VAR=%s make clean: removed %v, want %v\n%s", c.dir, gone, c.gone, out)
		}
	}
}
