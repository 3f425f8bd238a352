package pool

import (
	"strings"
	"testing"
)

// FuzzParse: any bytes give pools or an ErrInvalid error, never a panic,
// and an error never quotes a long run of the input.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`{"pools": {"etl": {"limit": 4}}}`, `{"pools": {}}`, `{`, `[]`, `{"pools": {"a": {"limit": 1e99}}}`, "\x00\xff", `{"pools": {"a": {"limit": -1}}} x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err != nil {
			if p != nil {
				t.Fatalf("pools and an error: %v %v", p, err)
			}
			if len(data) >= 80 && strings.Contains(err.Error(), string(data[:80])) {
				t.Fatalf("the error quotes the input: %v", err)
			}
			return
		}
		for name, limit := range p {
			if limit < 1 || limit > MaxLimit || name == "" {
				t.Fatalf("pool %q limit %d", name, limit)
			}
		}
	})
}
