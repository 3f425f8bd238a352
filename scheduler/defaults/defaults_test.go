package defaults_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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

// TestLoadRefusesWhatIsNotARegularFile: a FIFO (no writer: reading it
// would block forever) or a symbolic link to /dev/zero (endless) as the
// defaults file is refused at once, naming the file and what it is; a
// symbolic link to a regular file is read.
func TestLoadRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "real.json")
	os.WriteFile(good, []byte(`{"CELOS_DEFAULT_HDFS": "file:///"}`), 0o644)
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	fifoDir := filepath.Join(dir, "fifodir")
	os.Mkdir(fifoDir, 0o755)
	if err := syscall.Mkfifo(filepath.Join(fifoDir, defaults.FileName), 0o644); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.json")
	os.Symlink("/dev/zero", zero)
	link := filepath.Join(dir, "link.json")
	os.Symlink(good, link)
	for _, tc := range []struct{ path, want string }{
		{fifo, "fifo.json: not a regular file (named pipe)"},
		{fifoDir, "defaults.json: not a regular file (named pipe)"},
		{zero, "zero.json: not a regular file (symbolic link to a character device)"},
		{link, ""},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			type result struct {
				d   *defaults.Defaults
				err error
			}
			done := make(chan result, 1)
			go func() {
				d, err := defaults.Load(tc.path)
				done <- result{d, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(time.Minute):
				t.Fatalf("Load(%s) still blocked after a minute", tc.path)
			}
			if tc.want == "" {
				if r.err != nil || r.d.HDFS != "file:///" {
					t.Fatalf("Load = %+v, %v", r.d, r.err)
				}
				return
			}
			if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
				t.Fatalf("Load = %v, want an error saying %q", r.err, tc.want)
			}
		})
	}
}

// TestParseErrorsQuoteNoContent: an error about a file that is not a
// defaults document (a secret put in its place) repeats none of it.
func TestParseErrorsQuoteNoContent(t *testing.T) {
	const secret = "s3cr3tXq"
	for _, tc := range []struct{ doc, want string }{
		{"root:" + secret + ":19000", "d.json:1:1"},
		{`{"password": "` + secret + `"}`, "unknown key"},
		{`{"` + secret + `": 1}`, "unknown key"},
		{`{"CELOS_DEFAULT_HDFS": 31415926}`, "CELOS_DEFAULT_HDFS must be a string, not a number"},
		{`{"CELOS_DEFAULT_HDFS": {"` + secret + `": 1}}`, "CELOS_DEFAULT_HDFS must be a string, not an object"},
		{`{"CELOS_DEFAULT_OOZIE_PROPERTIES": "` + secret + `"}`, "must be an object of strings, not a string"},
		{`{"CELOS_DEFAULT_OOZIE_PROPERTIES": {"a": 31415926}}`, `CELOS_DEFAULT_OOZIE_PROPERTIES["a"] must be a string`},
		{`[31415926]`, "want a JSON object"},
		{`"` + secret + `"`, "want a JSON object"},
		{`{"CELOS_DEFAULT_HDFS": "x` + secret + `\q"}`, "d.json:1:"},
	} {
		_, err := defaults.Parse("d.json", []byte(tc.doc))
		if err == nil || !errors.Is(err, defaults.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s) = %v; want an ErrInvalid saying %q", tc.doc, err, tc.want)
			continue
		}
		for _, leak := range []string{secret, "31415926", "root"} {
			if strings.Contains(err.Error(), leak) {
				t.Errorf("Parse(%s) = %q repeats %q", tc.doc, err, leak)
			}
		}
	}
}
