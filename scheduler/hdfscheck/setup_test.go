package hdfscheck_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/celos-go/celos/scheduler/defaults"
	"github.com/celos-go/celos/scheduler/hdfscheck"
)

func TestSetupDefaultFS(t *testing.T) {
	dir := t.TempDir()
	core := `<configuration><property><name>fs.defaultFS</name><value>hdfs://nn.example:8020</value></property></configuration>`
	if err := os.WriteFile(filepath.Join(dir, "core-site.xml"), []byte(core), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		d    *defaults.Defaults
		dir  string
		want string
	}{
		{nil, dir, "hdfs://nn.example:8020"},
		{&defaults.Defaults{}, dir, "hdfs://nn.example:8020"},
		{&defaults.Defaults{HDFS: "hdfs://other:9000"}, dir, "hdfs://other:9000"},
	} {
		mux, fs, err := hdfscheck.Setup(tc.d, tc.dir, hdfscheck.Options{User: "celos"})
		if err != nil {
			t.Fatal(err)
		}
		if mux.Default != tc.want {
			t.Errorf("default file system %q, want %q", mux.Default, tc.want)
		}
		fs.Close()
	}
	t.Setenv("HADOOP_CONF_DIR", "")
	t.Setenv("HADOOP_HOME", "")
	if mux, _, err := hdfscheck.Setup(&defaults.Defaults{HDFS: "file:///"}, "", hdfscheck.Options{}); err != nil || mux.Default != "file:///" {
		t.Errorf("no Hadoop configuration: %v, %v", mux, err)
	}
	if _, _, err := hdfscheck.Setup(nil, t.TempDir(), hdfscheck.Options{}); err == nil {
		t.Error("an empty --hadoop-conf directory must be an error")
	}
}

func TestCollector(t *testing.T) {
	f := hdfscheck.New(nil, hdfscheck.Options{User: "celos"})
	defer f.Close()
	f.Exists(context.Background(), "hdfs://127.0.0.1:1", "/x") // refused: one error
	reg := prometheus.NewRegistry()
	reg.MustRegister(f.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		got[mf.GetName()] = mf.GetMetric()[0].GetCounter().GetValue()
	}
	want := map[string]float64{"celos_hdfs_rpcs_total": 0, "celos_hdfs_errors_total": 1, "celos_hdfs_connects_total": 0}
	if len(got) != len(want) {
		t.Errorf("metrics %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}
