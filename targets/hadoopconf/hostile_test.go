package hadoopconf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/child"

	"github.com/google/go-cmp/cmp"
)

// inChild runs body in a child process limited to 2 GiB and deadline
// (package child).
func inChild(t *testing.T, deadline time.Duration, body func() error) {
	t.Helper()
	child.Run(t, deadline, 2<<30, body)
}

// doubling is the configuration: each property refers to the
// previous one ten times, and the last one to itself ten times.
func doubling() Conf {
	c := Conf{"a0": "xxxxxxxxxx"}
	for i := 1; i <= 10; i++ {
		c[fmt.Sprintf("a%d", i)] = strings.Repeat(fmt.Sprintf("${a%d}", i-1), 10)
	}
	c["a"] = strings.Repeat("${a}", 10)
	c["fs.defaultFS"] = "hdfs://${a10}:8020"
	return c
}

// TestExpandExponential: ${…} references that multiply at each level
// expand in bounded time and memory (Hadoop's 20 substitutions at most,
// and a bound on the length of a value), instead of running out of
// memory.
func TestExpandExponential(t *testing.T) {
	inChild(t, 2*time.Minute, func() error {
		c := doubling()
		if v, err := c.Expand("a"); v != c["a"] || err != nil {
			return fmt.Errorf("Expand(a) of a value that refers to itself: %.100q, %v", v, err)
		}
		for _, k := range []string{"a10", "fs.defaultFS"} {
			if v := c.Get(k); len(v) > MaxExpandedLen {
				return fmt.Errorf("Get(%s) is %d bytes long", k, len(v))
			}
			if _, err := c.Expand(k); err == nil {
				return fmt.Errorf("Expand(%s): no error", k)
			}
		}
		if _, err := c.ClientOptions(Options{FS: "hdfs://nn:8020", User: "u"}); err == nil || !errors.Is(err, ErrExpansion) {
			return fmt.Errorf("ClientOptions: want ErrExpansion, got %v", err)
		}
		if _, err := c.Namenodes(""); !errors.Is(err, ErrExpansion) || !strings.Contains(err.Error(), "fs.defaultFS") {
			return fmt.Errorf("Namenodes of fs.defaultFS: want ErrExpansion naming it, got %v", err)
		}
		return nil
	})
}

// TestExpandLikeHadoop pins Hadoop's Configuration.substituteVars rules.
func TestExpandLikeHadoop(t *testing.T) {
	t.Setenv("CELOS_TEST_SET", "set")
	t.Setenv("CELOS_TEST_EMPTY", "")
	os.Unsetenv("CELOS_TEST_UNSET")
	chain := Conf{"v0": "end"}
	for i := 1; i <= 25; i++ {
		chain[fmt.Sprintf("v%d", i)] = fmt.Sprintf("${v%d}", i-1)
	}
	c := Merge(chain, Conf{
		"host":      "nn",
		"uri":       "hdfs://${host}:${port}",
		"port":      "9000",
		"self":      "a${self}b",
		"indirect":  "${selfish}",
		"selfish":   "x${indirect}",
		"unbound":   "${nope}/${host}",
		"space":     "${ho st}${host}",
		"empty":     "${}${host}",
		"dollar":    "$${host}",
		"env":       "${env.CELOS_TEST_SET}",
		"envdef":    "${env.CELOS_TEST_UNSET:-def}",
		"envempty":  "${env.CELOS_TEST_EMPTY:-def}",
		"envempty2": "${env.CELOS_TEST_EMPTY-def}",
		"envdash":   "${env.CELOS_TEST_UNSET-def}",
		"envnone":   "${env.CELOS_TEST_UNSET}",
	})
	want := map[string]string{
		"uri":       "hdfs://nn:9000",
		"self":      "a${self}b",  // a loop: the original expression
		"indirect":  "${selfish}", // too many substitutions: the original expression
		"unbound":   "${nope}/${host}",
		"space":     "${ho st}nn",
		"empty":     "${}nn",
		"dollar":    "$nn",
		"env":       "set",
		"envdef":    "def",
		"envempty":  "def",
		"envempty2": "",
		"envdash":   "def",
		"envnone":   "${env.CELOS_TEST_UNSET}",
		"v19":       "end",
		"v20":       "${v19}", // 20 substitutions: the original expression
		"v25":       "${v24}",
	}
	got := map[string]string{}
	for k := range want {
		got[k] = c.Get(k)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("Get (-want +got):\n%s", d)
	}
	if _, err := c.Expand("v19"); err != nil {
		t.Fatalf("19 substitutions are allowed: %v", err)
	}
	_, err := c.Expand("v20")
	if !errors.Is(err, ErrExpansion) || !strings.Contains(err.Error(), "v20") {
		t.Fatalf("Expand(v20): want ErrExpansion naming v20, got %v", err)
	}
	if v, err := c.Expand("missing"); v != "" || err != nil {
		t.Fatalf("Expand(missing) = %q, %v", v, err)
	}
}

// TestParseBounds: a billion-laughs entity declaration is not expanded,
// and the size, the element depth and the number of properties of a file
// are bounded.
func TestParseBounds(t *testing.T) {
	laughs := `<?xml version="1.0"?>
<!DOCTYPE configuration [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<configuration><property><name>a</name><value>&lol9;</value></property></configuration>`
	deep := "<configuration>" + strings.Repeat("<x>", 5000) + strings.Repeat("</x>", 5000) + "</configuration>"
	many := xmlConf(func() []string {
		var p []string
		for i := 0; i <= MaxProperties; i++ {
			p = append(p, fmt.Sprintf("p%d", i), "v")
		}
		return p
	}()...)
	big := "<configuration><property><name>a</name><value>" + strings.Repeat("x", MaxFileSize) + "</value></property></configuration>"
	for _, tc := range []struct{ name, data, want string }{
		{"laughs", laughs, "entity"},
		{"deep", deep, "nested deeper than"},
		{"many", string(many), "more than"},
		{"big", big, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(tc.name+".xml", []byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.name+".xml") {
				t.Fatalf("want an error naming the file and saying %q, got %v (%d properties)", tc.want, err, len(c))
			}
			if len(err.Error()) > 500 {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
		})
	}
}

// TestLoadNonRegular: a FIFO, a device or a symbolic link to one in a
// Hadoop configuration directory is refused at once, naming the file.
func TestLoadNonRegular(t *testing.T) {
	for _, kind := range []string{"fifo", "devzero", "devnull", "dir"} {
		t.Run(kind, func(t *testing.T) {
			inChild(t, time.Minute, func() error {
				dir, err := os.MkdirTemp("", "hadoopconf")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				if err := os.WriteFile(filepath.Join(dir, "core-site.xml"), xmlConf("fs.defaultFS", "hdfs://x:1"), 0o644); err != nil {
					return err
				}
				p := filepath.Join(dir, "hdfs-site.xml")
				switch kind {
				case "fifo":
					err = syscall.Mkfifo(p, 0o644)
				case "devzero":
					err = os.Symlink("/dev/zero", p)
				case "devnull":
					err = os.Symlink("/dev/null", p)
				case "dir":
					err = os.Mkdir(p, 0o755)
				}
				if err != nil {
					return err
				}
				_, err = Load(dir)
				if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "not a regular file") {
					return fmt.Errorf("Load: want an error naming %s as not a regular file, got %v", p, err)
				}
				return nil
			})
		})
	}
}

// TestKerberosFilesNonRegular: krb5.conf, a keytab and a credential cache
// that are FIFOs or devices are refused at once, naming them (and an
// empty credential cache is an error, not a panic).
func TestKerberosFilesNonRegular(t *testing.T) {
	for _, which := range []string{"krb5.conf", "keytab", "ccache", "empty-ccache"} {
		t.Run(which, func(t *testing.T) {
			inChild(t, time.Minute, func() error {
				dir, err := os.MkdirTemp("", "krb")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				cfg := filepath.Join(dir, "krb5.conf")
				if err := os.WriteFile(cfg, []byte("[libdefaults]\n default_realm = EXAMPLE.COM\n"), 0o644); err != nil {
					return err
				}
				os.Setenv("KRB5_CONFIG", cfg)
				opts := Options{FS: "hdfs://nn:8020"}
				var bad string
				switch which {
				case "krb5.conf":
					bad = cfg
					os.Remove(cfg)
					err = syscall.Mkfifo(cfg, 0o644)
				case "keytab":
					bad = filepath.Join(dir, "kt")
					opts.Keytab, opts.Principal = bad, "celos@EXAMPLE.COM"
					err = os.Symlink("/dev/zero", bad)
				case "ccache":
					bad = filepath.Join(dir, "cc")
					os.Setenv("KRB5CCNAME", "FILE:"+bad)
					err = syscall.Mkfifo(bad, 0o644)
				case "empty-ccache":
					bad = filepath.Join(dir, "cc")
					os.Setenv("KRB5CCNAME", bad)
					err = os.WriteFile(bad, nil, 0o600)
				}
				if err != nil {
					return err
				}
				c := Conf{"hadoop.security.authentication": "kerberos", "dfs.namenode.kerberos.principal": "nn/_HOST@EXAMPLE.COM"}
				_, err = c.ClientOptions(opts)
				if err == nil || !strings.Contains(err.Error(), bad) {
					return fmt.Errorf("ClientOptions: want an error naming %s, got %v", bad, err)
				}
				if which != "empty-ccache" && !strings.Contains(err.Error(), "not a regular file") {
					return fmt.Errorf("ClientOptions: want %s refused as not a regular file, got %v", bad, err)
				}
				return nil
			})
		})
	}
}
