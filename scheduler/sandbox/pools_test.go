package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/celos-go/celos/internal/testenv/fixture"
)

// TestPools: without a pools file every pool the workflows name is
// unlimited in the sandbox; a pools file that lacks one of them, or does
// not load, is refused before anything runs.
func TestPools(t *testing.T) {
	a, b := fixture.Hourly("a"), fixture.Hourly("b")
	a.Pool, b.Pool = "heavy", "heavy"
	opts := Options{Project: fixture.Project("p", a, b)}
	dir := t.TempDir()
	path, err := sandboxPools(opts, dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"pools":{"heavy":{"limit":1000000}}}`; string(data) != want {
		t.Fatalf("sandbox pools file %s, want %s", data, want)
	}
	if err := checkPools(opts); err != nil {
		t.Fatalf("no pools file: %v", err)
	}
	other := filepath.Join(dir, "other.json")
	os.WriteFile(other, []byte(`{"pools": {"light": {"limit": 2}}}`), 0o644)
	opts.PoolsFile = other
	if err := checkPools(opts); !errors.Is(err, ErrSetup) || !strings.Contains(err.Error(), `does not define the pool "heavy"`) {
		t.Fatalf("a pools file without heavy: %v", err)
	}
	os.WriteFile(other, []byte(`{"pools": `), 0o644)
	if err := checkPools(opts); !errors.Is(err, ErrSetup) {
		t.Fatalf("a pools file that does not load: %v", err)
	}
	if got, err := sandboxPools(opts, dir); err != nil || got != other {
		t.Fatalf("with a pools file the sandbox uses it: %q %v", got, err)
	}
}
