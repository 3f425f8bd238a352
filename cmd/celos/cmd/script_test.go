package cmd

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets testscript run the celos command in-process: a script's
// "exec celos ..." re-executes this test binary as celos.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"celos": func() {
			code := Main()
			markExit(os.Args[1:], code)
			os.Exit(code)
		},
	})
}

// TestScripts runs testdata/script/*.txtar. Set CELOS_UPDATE_GOLDEN=1 to
// rewrite the expected stdout/stderr sections from the actual output.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("..", "..", "..", "testdata", "script"),
		UpdateScripts:       os.Getenv("CELOS_UPDATE_GOLDEN") != "",
		RequireExplicitExec: true,
		Cmds:                scriptCmds,
		Setup: func(env *testscript.Env) error {
			// $REPO is the repository root (scripts/, testdata/demo).
			repo, err := filepath.Abs(filepath.Join("..", "..", ".."))
			if err != nil {
				return err
			}
			env.Setenv("REPO", repo)
			env.Setenv("CUE_REGISTRY", "none")
			env.Setenv("HOME", env.WorkDir)
			// celos's cache (internal/cache) inside the script's directory.
			env.Setenv("XDG_CACHE_HOME", filepath.Join(env.WorkDir, ".cache"))
			return nil
		},
	})
}
