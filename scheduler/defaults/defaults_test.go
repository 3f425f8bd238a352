package defaults_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/celos-go/celos/scheduler/defaults"
)

func TestParse(t *testing.T) {
	d, err := defaults.Parse("d.json", []byte(`{
  "CELOS_DEFAULT_HDFS": "hdfs://nameservice1",
  "CELOS_DEFAULT_OOZIE": "http://oozie.example:11000/oozie",
  "CELOS_DEFAULT_OOZIE_PROPERTIES": {"user.name": "celos", "jobTracker": "rm:8032"}
}`))
	if err != nil {
		t.Fatal(err)
	}
	if d.HDFS != "hdfs://nameservice1" || d.Oozie != "http://oozie.example:11000/oozie" ||
		d.OozieProperties["user.name"] != "celos" || d.OozieProperties["jobTracker"] != "rm:8032" {
		t.Errorf("parsed %+v", d)
	}
	if d, err := defaults.Parse("empty.json", []byte(`{}`)); err != nil || d.HDFS != "" || d.OozieProperties != nil {
		t.Errorf("empty: %+v, %v", d, err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"CELOS_DEFAULT_HDFS": "hdfs://nn", }`, "d.json:1:37"},
		{"{\n  \"CELOS_DEFAULT_OOZIE\": \"http://o\"\n  \"x\": 1}", "d.json:3:3"},
		{`[]`, "want a JSON object"},
		{`null`, "got null"},
		{`{"CELOS_DEFAULT_OOZY": "http://o"}`, `unknown key "CELOS_DEFAULT_OOZY"`},
		{`{"CELOS_DEFAULT_HDFS": 8020}`, "CELOS_DEFAULT_HDFS must be a string"},
		{`{"CELOS_DEFAULT_HDFS": "nn:8020"}`, "want an hdfs:// or file:// URI"},
		{`{"CELOS_DEFAULT_HDFS": "hdfs:///path"}`, "names no NameNode"},
		{`{"CELOS_DEFAULT_OOZIE": "oozie:11000"}`, "want an http(s) URL"},
		{`{"CELOS_DEFAULT_OOZIE": "http://o:11000/oozie?x=1"}`, "no query"},
		{`{"CELOS_DEFAULT_OOZIE_PROPERTIES": {"retries": 3}}`, `CELOS_DEFAULT_OOZIE_PROPERTIES["retries"] must be a string`},
		{`{"CELOS_DEFAULT_OOZIE_PROPERTIES": ["a"]}`, "must be an object of strings"},
		{`{"CELOS_DEFAULT_OOZIE_PROPERTIES": null}`, "must be an object of strings"},
	} {
		_, err := defaults.Parse("d.json", []byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, defaults.ErrInvalid) {
			t.Errorf("Parse(%s) = %v; want an ErrInvalid containing %q", tc.doc, err, tc.want)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if _, err := defaults.Load(dir); err == nil || !strings.Contains(err.Error(), "defaults.json") {
		t.Errorf("empty dir: %v", err)
	}
	path := filepath.Join(dir, defaults.FileName)
	if err := os.WriteFile(path, []byte(`{"CELOS_DEFAULT_HDFS": "file:///"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, path} {
		if d, err := defaults.Load(p); err != nil || d.HDFS != "file:///" {
			t.Errorf("Load(%s) = %+v, %v", p, d, err)
		}
	}
}

// FuzzParse: any input is either refused with ErrInvalid or gives
// defaults that validate.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"CELOS_DEFAULT_HDFS": "hdfs://nn:8020", "CELOS_DEFAULT_OOZIE": "http://o:11000/oozie", "CELOS_DEFAULT_OOZIE_PROPERTIES": {"a": "b"}}`))
	f.Add([]byte(`{"CELOS_DEFAULT_HDFS": 1}`))
	f.Add([]byte("{\n\"x\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := defaults.Parse("f.json", data)
		if err != nil {
			if !errors.Is(err, defaults.ErrInvalid) || !strings.HasPrefix(err.Error(), "f.json") {
				t.Fatalf("error without context: %v", err)
			}
			return
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("accepted defaults do not validate: %v", err)
		}
	})
}
