package cmd

import "github.com/celos-go/celos/internal/cache"

// cacheDir is celos's cache directory (internal/cache), or "" when there
// is none or CELOS_CACHE_DIR=off: the commands then work without it.
func cacheDir() string {
	d, err := cache.Dir()
	if err != nil {
		return ""
	}
	return d
}
