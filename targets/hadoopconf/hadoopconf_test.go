package hadoopconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func xmlConf(props ...string) []byte {
	var b strings.Builder
	b.WriteString("<?xml version=\"1.0\"?>\n<configuration>\n")
	for i := 0; i+1 < len(props); i += 2 {
		b.WriteString("  <property><name>" + props[i] + "</name><value>" + props[i+1] + "</value></property>\n")
	}
	b.WriteString("</configuration>\n")
	return []byte(b.String())
}

func TestParseAndMerge(t *testing.T) {
	core, err := Parse("core-site.xml", xmlConf("fs.defaultFS", " hdfs://nn1:9000 ", "a", "core"))
	if err != nil {
		t.Fatal(err)
	}
	hdfs, err := Parse("hdfs-site.xml", xmlConf("a", "hdfs"))
	if err != nil {
		t.Fatal(err)
	}
	c := Merge(core, hdfs)
	if def, _ := c.DefaultFS(); def != "hdfs://nn1:9000" || c["a"] != "hdfs" {
		t.Fatalf("merged conf %v", c)
	}
	if _, err := Parse("bad.xml", []byte("<configuration><property>")); err == nil || !strings.Contains(err.Error(), "bad.xml") {
		t.Fatalf("want an error naming the file, got %v", err)
	}
	if _, err := Parse("x.xml", []byte("{}")); err == nil {
		t.Fatal("JSON accepted as Hadoop XML")
	}
}

func TestDefaultFSAndLocal(t *testing.T) {
	if got, _ := (Conf{}).DefaultFS(); got != "file:///" {
		t.Fatalf("default fs %q", got)
	}
	if got, _ := (Conf{"fs.default.name": "hdfs://old:8020"}).DefaultFS(); got != "hdfs://old:8020" {
		t.Fatalf("deprecated key: %q", got)
	}
	if !(Conf{"fs.defaultFS": "file:///"}).IsLocal("") {
		t.Fatal("file:/// not local")
	}
	if (Conf{"fs.defaultFS": "hdfs://nn"}).IsLocal("") {
		t.Fatal("hdfs:// local")
	}
}

// TestDefaultFSHadoopNames: fs.defaultFS is read as Hadoop's
// FileSystem.getDefaultUri reads it. Before, a name without a scheme
// (Hadoop's deprecated "namenode" or "namenode:8020", which Hadoop and
// Oozie take as hdfs://) counted as the local disk: deploy put the Oozie
// directory on the installation's disk and hdfsCheck looked there.
func TestDefaultFSHadoopNames(t *testing.T) {
	for _, tc := range []struct {
		value, want, err string
		local            bool
	}{
		{value: "namenode", want: "hdfs://namenode"},
		{value: "nn1.example.com:8020", want: "hdfs://nn1.example.com:8020"},
		{value: "local", want: "file:///", local: true},
		{value: "  hdfs://nn:8020\n ", want: "hdfs://nn:8020"},
		{value: "file:///", want: "file:///", local: true},
		{value: "/data/hdfs", err: `fs.defaultFS "/data/hdfs" names no file system: want a URI such as hdfs://namenode:8020, or file:///`},
	} {
		t.Run(tc.value, func(t *testing.T) {
			c := Conf{"fs.defaultFS": strings.ReplaceAll(tc.value, `\n`, "\n")}
			got, err := c.DefaultFS()
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("DefaultFS = %q, %v; want the error %s", got, err, tc.err)
				}
			} else if err != nil || got != tc.want {
				t.Fatalf("DefaultFS = %q, %v; want %q", got, err, tc.want)
			}
			if l := c.IsLocal(""); l != tc.local {
				t.Errorf("IsLocal = %v, want %v", l, tc.local)
			}
		})
	}
}

func TestNamenodes(t *testing.T) {
	// Two HA name services in one hdfs-site.xml (colinmarc/hdfs #320 mixes them).
	ha := Conf{
		"fs.defaultFS":                          "hdfs://prod",
		"dfs.nameservices":                      "prod,backup",
		"dfs.ha.namenodes.prod":                 "nn1, nn2",
		"dfs.namenode.rpc-address.prod.nn1":     "p1.example:8020",
		"dfs.namenode.rpc-address.prod.nn2":     "p2.example",
		"dfs.ha.namenodes.backup":               "a",
		"dfs.namenode.rpc-address.backup.a":     "b1.example:9000",
		"dfs.namenode.rpc-address.standalone":   "s.example:1234",
		"dfs.namenode.rpc-address.prod.unused":  "never.example:1",
		"dfs.namenode.rpc-address.missing.nn1x": "x",
	}
	for _, tc := range []struct {
		fs   string
		want []string
		err  string
	}{
		{"", []string{"p1.example:8020", "p2.example:8020"}, ""},
		{"hdfs://backup/", []string{"b1.example:9000"}, ""},
		{"hdfs://standalone", []string{"s.example:1234"}, ""},
		{"hdfs://plain.example", []string{"plain.example:8020"}, ""},
		{"hdfs://127.0.0.1:9000", []string{"127.0.0.1:9000"}, ""},
		{"file:///", nil, "not an hdfs:// URI"},
		{"hdfs:///path", nil, "no NameNode host"},
	} {
		got, err := ha.Namenodes(tc.fs)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Namenodes(%q): error %v, want %q", tc.fs, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Namenodes(%q): %v", tc.fs, err)
		} else if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("Namenodes(%q) (-want +got):\n%s", tc.fs, d)
		}
	}
	broken := Conf{"fs.defaultFS": "hdfs://ns", "dfs.nameservices": "ns", "dfs.ha.namenodes.ns": "nn1"}
	if _, err := broken.Namenodes(""); err == nil || !strings.Contains(err.Error(), "dfs.namenode.rpc-address.ns.nn1") {
		t.Fatalf("want an error naming the missing key, got %v", err)
	}
	listedOnly := Conf{"fs.defaultFS": "hdfs://ns", "dfs.nameservices": "ns"}
	if _, err := listedOnly.Namenodes(""); err == nil || !strings.Contains(err.Error(), "dfs.ha.namenodes.ns") {
		t.Fatalf("want an error for a name service without namenodes, got %v", err)
	}
}

func TestGetExpands(t *testing.T) {
	t.Setenv("CELOS_TEST_NN", "envhost")
	c := Conf{
		"nn":           "n1.example",
		"fs.defaultFS": "hdfs://${nn}:${port}",
		"port":         "9000",
		"e":            "${env.CELOS_TEST_NN}",
		"loop":         "${loop}",
		"unknown":      "${nope}/x",
	}
	if got, _ := c.DefaultFS(); got != "hdfs://n1.example:9000" {
		t.Fatalf("DefaultFS %q", got)
	}
	if got := c.Get("e"); got != "envhost" {
		t.Fatalf("env expansion %q", got)
	}
	if got := c.Get("loop"); got != "${loop}" {
		t.Fatalf("self reference %q", got)
	}
	if got := c.Get("unknown"); got != "${nope}/x" {
		t.Fatalf("unknown reference %q", got)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "core-site.xml") {
		t.Fatalf("empty dir: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "core-site.xml"), xmlConf("fs.defaultFS", "hdfs://x:1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hdfs-site.xml"), xmlConf("fs.defaultFS", "hdfs://y:2"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if def, _ := c.DefaultFS(); def != "hdfs://y:2" {
		t.Fatalf("hdfs-site.xml should override core-site.xml: %v", c)
	}
	t.Setenv("HADOOP_CONF_DIR", dir)
	if Dir() != dir {
		t.Fatalf("Dir() = %q", Dir())
	}
}

func TestClientOptions(t *testing.T) {
	c := Conf{
		"fs.defaultFS":                     "hdfs://ns",
		"dfs.ha.namenodes.ns":              "a,b",
		"dfs.namenode.rpc-address.ns.a":    "h1:1",
		"dfs.namenode.rpc-address.ns.b":    "h2:2",
		"dfs.client.use.datanode.hostname": "true",
	}
	t.Setenv("HADOOP_USER_NAME", "deployer")
	co, err := c.ClientOptions(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"h1:1", "h2:2"}, co.Addresses); d != "" {
		t.Fatalf("NameNode addresses (-want +got):\n%s", d)
	}
	if co.User != "deployer" || !co.UseDatanodeHostname || co.NamenodeDialFunc == nil {
		t.Fatalf("options %+v", co)
	}
	co, err = c.ClientOptions(Options{User: "explicit", FS: "hdfs://other:3"})
	if err != nil || co.User != "explicit" || co.Addresses[0] != "other:3" {
		t.Fatalf("options %+v %v", co, err)
	}
	// Kerberos without a krb5.conf or credential cache fails with a hint.
	t.Setenv("KRB5_CONFIG", filepath.Join(t.TempDir(), "none.conf"))
	k := Merge(c, Conf{"hadoop.security.authentication": "kerberos", "dfs.namenode.kerberos.principal": "nn/_HOST@R"})
	if _, err := k.ClientOptions(Options{}); err == nil || !strings.Contains(err.Error(), "KRB5_CONFIG") {
		t.Fatalf("kerberos without config: %v", err)
	}
}

func TestKerberos(t *testing.T) {
	for v, want := range map[string]bool{"kerberos": true, " Kerberos ": true, "simple": false, "": false, "${auth}": true} {
		c := Conf{"hadoop.security.authentication": v, "auth": "kerberos"}
		if got := c.Kerberos(); got != want {
			t.Errorf("hadoop.security.authentication %q: Kerberos() = %v, want %v", v, got, want)
		}
	}
}
