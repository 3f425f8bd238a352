package sandbox

// The pools a sandbox's engine runs with.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/celos-go/celos/scheduler/pool"
)

// namedPools lists the pools the project's workflows name, sorted.
func namedPools(opts Options) []string {
	seen := map[string]bool{}
	var names []string
	for _, w := range opts.Project.Workflows {
		if w.Pool != "" && !seen[w.Pool] {
			seen[w.Pool] = true
			names = append(names, w.Pool)
		}
	}
	sort.Strings(names)
	return names
}

// checkPools refuses, before anything runs, a pools file that does not
// load or that lacks a pool a workflow names (its READY slots would wait
// until the case's timeout).
func checkPools(opts Options) error {
	if opts.PoolsFile == "" {
		return nil
	}
	defined, _, err := pool.NewFile(opts.PoolsFile).Load()
	if err != nil {
		return fmt.Errorf("%w: pools file %s: %v", ErrSetup, opts.PoolsFile, err)
	}
	for _, name := range namedPools(opts) {
		if _, ok := defined[name]; !ok {
			return fmt.Errorf("%w: pools file %s does not define the pool %q that a workflow names", ErrSetup, opts.PoolsFile, name)
		}
	}
	return nil
}

// sandboxPools returns the pools file a case's engine reads: the
// installation's (Options.PoolsFile), or one written in dir that gives
// every pool the workflows name the largest limit.
func sandboxPools(opts Options, dir string) (string, error) {
	if opts.PoolsFile != "" {
		return opts.PoolsFile, nil
	}
	names := namedPools(opts)
	if len(names) == 0 {
		return "", nil
	}
	type def struct {
		Limit int `json:"limit"`
	}
	doc := struct {
		Pools map[string]def `json:"pools"`
	}{Pools: map[string]def{}}
	for _, n := range names {
		doc.Pools[n] = def{Limit: pool.MaxLimit}
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "pools.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", fmt.Errorf("write the sandbox's pools file: %w", err)
	}
	return path, nil
}
