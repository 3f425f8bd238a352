package cmd

import (
	"fmt"
	"os"
	"runtime/debug"
	"syscall"

	"github.com/celos-go/celos/internal/cache"
	"github.com/celos-go/celos/schema"
)

// cacheDir is celos's cache directory (internal/cache), or "" when there
// is none or CELOS_CACHE_DIR=off: the commands then work without it.
func cacheDir() string {
	d, err := cache.Dir()
	if err != nil {
		return ""
	}
	return d
}

// compileCache is the compile cache of vet, export and deploy's compile
// step: nil with noCache (--no-cache), without a cache directory, or
// when this celos's build cannot be told apart from another's.
func compileCache(noCache bool) *schema.Cache {
	if noCache {
		return nil
	}
	dir := cacheDir()
	build := buildID()
	if dir == "" || build == "" {
		return nil
	}
	return &schema.Cache{Store: cache.Open(dir), Build: build}
}

// buildID identifies this celos build: its version and source revision,
// and its executable file (device, inode, size, modification time), so
// that a development build rebuilt under the same version never answers
// from the previous build's cache. "" when the executable is unknown.
func buildID() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	fi, err := os.Stat(exe)
	if err != nil {
		return ""
	}
	id := fmt.Sprintf("%s %s %d %d", version(), exe, fi.Size(), fi.ModTime().UnixNano())
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id += fmt.Sprintf(" %d %d %d", st.Dev, st.Ino, st.Ctim.Nano())
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" || s.Key == "vcs.modified" {
				id += " " + s.Key + "=" + s.Value
			}
		}
	}
	return id
}
