package oozie

// Options only the tests set.

// WithVersion pins the API version ("v1" or "v2") instead of asking
// GET /versions on first use.
func WithVersion(v string) Option { return func(c *Client) { c.version = v } }
