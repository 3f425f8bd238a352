package targets

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/celos-go/celos/internal/testenv"
	"github.com/celos-go/celos/targets/hadoopconf"
)

const celosManualExample = `{ "hadoop.hdfs-site.xml": "sftp://celos002.ewr004.collective-media.net/etc/hadoop/conf/hdfs-site.xml",
  "hadoop.core-site.xml": "sftp://celos002.ewr004.collective-media.net/etc/hadoop/conf/core-site.xml",
  "defaults.dir.uri": "sftp://celos002.ewr004.collective-media.net/etc/celos/defaults",
  "workflows.dir.uri": "sftp://celos002.ewr004.collective-media.net/etc/celos/workflows", }`

func TestParseCelosManualExample(t *testing.T) {
	// The Celos manual's example, trailing comma included.
	tg, err := Parse([]byte(celosManualExample), "example.json", ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := tg.WorkflowsDir.String(); got != "sftp://celos002.ewr004.collective-media.net/etc/celos/workflows" {
		t.Errorf("workflows dir %s", got)
	}
	if tg.HDFSSite.Path != "/etc/hadoop/conf/hdfs-site.xml" || tg.CoreSite.Host != "celos002.ewr004.collective-media.net" {
		t.Errorf("hadoop files %+v %+v", tg.HDFSSite, tg.CoreSite)
	}
	if tg.DefaultsDir == nil || tg.DefaultsDir.Path != "/etc/celos/defaults" {
		t.Errorf("defaults dir %+v", tg.DefaultsDir)
	}
	// CELOS_CI_USERNAME replaces the user of every sftp URL.
	tg, err = Parse([]byte(`{"hadoop.hdfs-site.xml": "sftp://old@h:2222/h.xml", "hadoop.core-site.xml": "sftp://h/c.xml",
		"workflows.dir.uri": "sftp://h/w", "hive.jdbc.url": "jdbc:hive2://x", "hdfs.root": "/apps/celos"}`), "t.json", ParseOptions{User: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	if tg.HDFSSite.User != "ci" || tg.CoreSite.User != "ci" || tg.WorkflowsDir.User != "ci" || tg.HDFSSite.Port != "2222" {
		t.Errorf("user override: %+v %+v %+v", tg.HDFSSite, tg.CoreSite, tg.WorkflowsDir)
	}
	if tg.HDFSRoot != "/apps/celos" || len(tg.Extra) != 1 || tg.Extra[0] != "hive.jdbc.url" || tg.DefaultsDir != nil {
		t.Errorf("extensions: %+v", tg)
	}
}

func TestParseErrorsNameKeyAndURL(t *testing.T) {
	good := map[string]string{
		KeyHDFSSite:     `"file:///etc/hadoop/hdfs-site.xml"`,
		KeyCoreSite:     `"file:///etc/hadoop/core-site.xml"`,
		KeyWorkflowsDir: `"file:///var/celos/workflows"`,
	}
	doc := func(over map[string]string, drop string) string {
		var parts []string
		for _, k := range []string{KeyHDFSSite, KeyCoreSite, KeyWorkflowsDir, KeyDefaultsDir, KeyHDFSRoot} {
			v, ok := over[k]
			if !ok {
				v, ok = good[k]
			}
			if ok && k != drop {
				parts = append(parts, `"`+k+`": `+v)
			}
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	for _, tc := range []struct {
		name, data string
		want       []string
	}{
		{"missing workflows", doc(nil, KeyWorkflowsDir), []string{"t.json", "workflows.dir.uri was not specified in the target file"}},
		{"missing core-site", doc(nil, KeyCoreSite), []string{"hadoop.core-site.xml was not specified"}},
		{"number", doc(map[string]string{KeyWorkflowsDir: `42`}, ""), []string{"workflows.dir.uri", "want a string", "42"}},
		{"empty", doc(map[string]string{KeyWorkflowsDir: `" "`}, ""), []string{"workflows.dir.uri is empty"}},
		{"ftp", doc(map[string]string{KeyHDFSSite: `"ftp://h/x.xml"`}, ""), []string{"hadoop.hdfs-site.xml", "ftp://h/x.xml", "unsupported scheme"}},
		{"hdfs url", doc(map[string]string{KeyWorkflowsDir: `"hdfs://nn/w"`}, ""), []string{"workflows.dir.uri", "hdfs://nn/w", "not a file: or sftp: URL"}},
		{"password", doc(map[string]string{KeyWorkflowsDir: `"sftp://u:secret@h/w"`}, ""), []string{"workflows.dir.uri", "passwords in URLs are not supported"}},
		{"relative sftp", doc(map[string]string{KeyWorkflowsDir: `"sftp:w"`}, ""), []string{"workflows.dir.uri"}},
		{"relative file without base", doc(map[string]string{KeyWorkflowsDir: `"file:w"`}, ""), []string{"relative file: URL"}},
		{"no host", doc(map[string]string{KeyWorkflowsDir: `"sftp:///w"`}, ""), []string{"names no host"}},
		{"bad root", doc(map[string]string{KeyHDFSRoot: `"/a/../b"`}, ""), []string{"hdfs.root", "/a/../b"}},
		{"root slash", doc(map[string]string{KeyHDFSRoot: `"/a/"`}, ""), []string{"hdfs.root", "must start with / and not end with /"}},
		{"array", `[1,2]`, []string{"not a JSON object"}},
		{"null", `null`, []string{"not a JSON object"}},
		{"trailing", doc(nil, "") + `{}`, []string{"trailing data"}},
		{"syntax", `{"a": }`, []string{"not a JSON object", "at byte"}},
		{"latin1", "{\"a\": \"\xe9\"}", []string{"not UTF-8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.data), "t.json", ParseOptions{})
			if err == nil {
				t.Fatalf("accepted %s", tc.data)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		raw, base, want string
		user, port      string
	}{
		{"file:///etc/x", "", "file:///etc/x", "", ""},
		{"file:/etc/x/../y", "", "file:///etc/y", "", ""},
		{"file://localhost/etc/x", "", "file:///etc/x", "", ""},
		{"file:conf/x.xml", "/base/dir", "file:///base/dir/conf/x.xml", "", ""},
		{"sftp://h/etc/x", "", "sftp://h/etc/x", "", ""},
		{"sftp://u@h:2222/etc/x", "", "sftp://u@h:2222/etc/x", "u", "2222"},
		{"sftp://u@[::1]:2222/x", "", "sftp://u@[::1]:2222/x", "u", "2222"},
		{"sftp://h", "", "sftp://h/", "", ""},
		{"SFTP://h/a%20b", "", "sftp://h/a%20b", "", ""},
	} {
		l, err := ParseURL(tc.raw, tc.base)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", tc.raw, err)
			continue
		}
		if l.String() != tc.want || l.User != tc.user || l.Port != tc.port {
			t.Errorf("ParseURL(%q) = %s (user %q port %q), want %s", tc.raw, l, l.User, l.Port, tc.want)
		}
	}
	for _, raw := range []string{"", "/etc/x", "file://otherhost/x", "file:", "sftp://h/x?y=1", "sftp://h/x#f", "sftp://h:/x", "sftp://h:0/x", "sftp://h:70000/x", "sftp://[:]/x", "sftp://a b/x", "s3://b/k", "file:///a\x00b", "sftp://u:p@h/x"} {
		if l, err := ParseURL(raw, ""); err == nil {
			t.Errorf("ParseURL(%q) accepted: %s", raw, l)
		}
	}
}

func TestValidateHDFSRoot(t *testing.T) {
	for _, ok := range []string{"/user/celos/app", "/hdfs/Some/Root", "/a"} {
		if err := ValidateHDFSRoot(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	// Celos's own examples of bad roots, and path tricks.
	for _, bad := range []string{"hdfsRoot", "/hdfsRoot/", "/", "", "/a//b", "/a/./b", "/a/../b", "/..", "/a\x00"} {
		if err := ValidateHDFSRoot(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestLoadLocalTarget reads a target file and its Hadoop XML from disk,
// with URLs relative to the target file (testdata/targets/local.json).
func TestLoadLocalTarget(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c := NewConnector(SSHOptions{}, hadoopconf.Options{})
	defer c.Close()
	tg, err := Load(context.Background(), c, filepath.Join(root, "testdata", "targets", "local.json"), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.ToSlash(filepath.Join(root, "testdata", "targets", "local", "workflows")); tg.WorkflowsDir.Path != want {
		t.Errorf("workflows dir %s, want %s", tg.WorkflowsDir.Path, want)
	}
	conf, err := tg.HadoopConf(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if !conf.IsLocal("") {
		def, _ := conf.DefaultFS()
		t.Errorf("fs.defaultFS %q, want file:///", def)
	}
	// A missing target file is an error naming it.
	_, err = Load(context.Background(), c, "file:///nonexistent/target.json", ParseOptions{})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/target.json") {
		t.Errorf("missing target: %v", err)
	}
	// Every sample target file in testdata/targets parses.
	samples, _ := filepath.Glob(filepath.Join(root, "testdata", "targets", "*.json"))
	if len(samples) < 2 {
		t.Fatalf("want sample target files in testdata/targets, found %v", samples)
	}
	for _, p := range samples {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(data, p, ParseOptions{BaseDir: filepath.Dir(p)}); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// FuzzParse: the target-file parser never panics, and what it accepts has
// the required keys as clean absolute file: or sftp: locations; errors
// name the source.
func FuzzParse(f *testing.F) {
	f.Add([]byte(celosManualExample))
	f.Add([]byte(`{"hadoop.hdfs-site.xml":"file:h.xml","hadoop.core-site.xml":"file:///c.xml","workflows.dir.uri":"sftp://u@h:22/w","hdfs.root":"/r"}`))
	f.Add([]byte(`{"workflows.dir.uri": "sftp://h/w",}`))
	f.Add([]byte(`{"a":"\",}"}`))
	f.Add([]byte(`[]`))
	f.Add([]byte("\xef\xbb\xbf{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tg, err := Parse(data, "fuzz.json", ParseOptions{BaseDir: "/base", User: "ci"})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "target file fuzz.json: ") {
				t.Fatalf("error does not name the source: %v", err)
			}
			return
		}
		for _, l := range []Location{tg.HDFSSite, tg.CoreSite, tg.WorkflowsDir} {
			if l.Scheme != "file" && l.Scheme != "sftp" {
				t.Fatalf("scheme %q accepted", l.Scheme)
			}
			if !strings.HasPrefix(l.Path, "/") || strings.Contains(l.Path, "/../") || strings.ContainsRune(l.Path, 0) {
				t.Fatalf("path %q accepted", l.Path)
			}
			if l.Scheme == "sftp" && (l.Host == "" || l.User != "ci") {
				t.Fatalf("sftp location %+v", l)
			}
			if !utf8.ValidString(l.String()) {
				t.Fatalf("invalid UTF-8 in %q", l.String())
			}
			// A location's URL parses back to itself.
			back, err := ParseURL(l.String(), "")
			if err != nil || back != l {
				t.Fatalf("round trip of %+v: %+v, %v", l, back, err)
			}
		}
		if tg.HDFSRoot != "" && ValidateHDFSRoot(tg.HDFSRoot) != nil {
			t.Fatalf("hdfs.root %q accepted", tg.HDFSRoot)
		}
	})
}

// TestURLErrorsRedactOnlyPasswords: a URL in a message hides a password,
// and shows a URL without one as written (not user:xxxxx@).
func TestURLErrorsRedactOnlyPasswords(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{"sftp://deploy@celos.example.com/etc/t.json?x=1", `URL "sftp://deploy@celos.example.com/etc/t.json?x=1": a query or fragment is not allowed`},
		{"sftp://deploy:hunter2@celos.example.com/etc/t.json?x=1", `URL "sftp://deploy:xxxxx@celos.example.com/etc/t.json?x=1": a query or fragment is not allowed`},
		{"file://alice@/etc/t.json", `URL "file://alice@/etc/t.json": a file: URL has no user`},
	} {
		_, err := ParseURL(tc.raw, "")
		if err == nil || err.Error() != tc.want {
			t.Errorf("ParseURL(%q): %v\nwant %s", tc.raw, err, tc.want)
		}
	}
}

// TestTargetLocationNamesAFile: a --target URL without a path
// (sftp://host, sftp://host/) names no target file and is refused before
// any connection; before, celos looked for an SSH key and connected to
// read "/".
func TestTargetLocationNamesAFile(t *testing.T) {
	for _, raw := range []string{"sftp://celos.example.com", "sftp://celos.example.com/", "sftp://celos.example.com:2222/", "file:///"} {
		_, err := TargetLocation(raw, "")
		if err == nil || !strings.Contains(err.Error(), "names no target file") {
			t.Errorf("TargetLocation(%q) = %v, want an error saying it names no target file", raw, err)
		}
	}
	if _, err := TargetLocation("sftp://celos.example.com/etc/celos/t.json", ""); err != nil {
		t.Errorf("a URL with a path: %v", err)
	}
}
