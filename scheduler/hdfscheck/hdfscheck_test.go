package hdfscheck_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/celos-go/celos/internal/testenv/hdfstest"
	"github.com/celos-go/celos/scheduler/hdfscheck"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/targets/hadoopconf"
)

func TestMain(m *testing.M) { hdfstest.Main(m) }

var _ trigger.FileSystems = (*hdfscheck.FS)(nil)

func mkfile(t testing.TB, c *hdfstest.Cluster, p string) {
	t.Helper()
	cl := c.Client()
	if err := cl.MkdirAll(p[:strings.LastIndexByte(p, '/')], 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := cl.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestExists(t *testing.T) {
	ctx := context.Background()
	c := hdfstest.Shared(t)
	dir := "/" + t.Name()
	mkfile(t, c, dir+"/2015-09-12/20/_READY")

	conf, err := hadoopconf.Load(c.ConfDir())
	if err != nil {
		t.Fatal(err)
	}
	f := hdfscheck.New(conf, hdfscheck.Options{User: c.User()})
	defer f.Close()
	fsURI := "hdfs://" + c.Addr()
	for _, tc := range []struct {
		fs, path string
		want     bool
	}{
		{fsURI, dir + "/2015-09-12/20/_READY", true},
		{fsURI, dir + "/2015-09-12/20", true}, // a directory counts
		{fsURI, dir + "/2015-09-12/21/_READY", false},
		{fsURI, dir + "/2015-09-12/20/_READY/x", false},  // below a file
		{"", dir + "/2015-09-12/20/_READY", true},        // fs.defaultFS of the conf
		{"", c.URL(dir + "/2015-09-12/20/_READY"), true}, // a full URI as the path
		{fsURI + "/", dir + "//2015-09-12/./20/_READY", true},
	} {
		got, err := f.Exists(ctx, tc.fs, tc.path)
		if err != nil || got != tc.want {
			t.Errorf("Exists(%q, %q) = %v, %v; want %v", tc.fs, tc.path, got, err, tc.want)
		}
	}
	if st := f.Stats(); st.Connects != 1 || st.Calls != 7 || st.Errors != 0 {
		t.Errorf("stats %+v: want one connection kept for every call, 7 calls", st)
	}
	got, err := f.DefaultFS()
	want, _ := conf.DefaultFS()
	if err != nil || got != want {
		t.Errorf("DefaultFS = %q, %v; want %q", got, err, want)
	}

	for _, tc := range []struct{ fs, path, want string }{
		{fsURI, "relative/_READY", "not absolute"},
		{fsURI, "", "empty path"},
		{"file:///", "/x", "not an hdfs://host URI"},
		{fsURI, "s3://bucket/x", "not on HDFS"},
	} {
		if _, err := f.Exists(ctx, tc.fs, tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Exists(%q, %q) = %v; want an error with %q", tc.fs, tc.path, err, tc.want)
		}
	}
}

// rpcProxy forwards connections to a NameNode and counts the RPCs that
// pass, by method name, from Hadoop's wire format: a connection header
// ("hrpc", version, service class, auth), then frames of a 4-byte length
// and varint-delimited RpcRequestHeaderProto, RequestHeaderProto (field 1:
// methodName) and the request.
type rpcProxy struct {
	addr   string
	mu     sync.Mutex
	counts map[string]int
}

func startRPCProxy(t testing.TB, target string) *rpcProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &rpcProxy{addr: ln.Addr().String(), counts: make(map[string]int)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c, target)
		}
	}()
	return p
}

func (p *rpcProxy) serve(c net.Conn, target string) {
	defer c.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	go io.Copy(c, up)
	r := bufio.NewReader(c)
	hdr := make([]byte, 7)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return
	}
	up.Write(hdr)
	for {
		var n [4]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(n[:]))
		if _, err := io.ReadFull(r, frame); err != nil {
			return
		}
		if m := methodName(frame); m != "" {
			p.mu.Lock()
			p.counts[m]++
			p.mu.Unlock()
		}
		up.Write(n[:])
		up.Write(frame)
	}
}

func methodName(frame []byte) string {
	l, k := protowire.ConsumeVarint(frame) // RpcRequestHeaderProto
	if k < 0 || int(l) > len(frame)-k {
		return ""
	}
	frame = frame[k+int(l):]
	l, k = protowire.ConsumeVarint(frame) // RequestHeaderProto
	if k < 0 || int(l) > len(frame)-k {
		return ""
	}
	rh := frame[k : k+int(l)]
	num, typ, k := protowire.ConsumeTag(rh)
	if k < 0 || num != 1 || typ != protowire.BytesType {
		return ""
	}
	name, k2 := protowire.ConsumeBytes(rh[k:])
	if k2 < 0 {
		return ""
	}
	return string(name)
}

func (p *rpcProxy) count(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[method]
}

// One getFileInfo RPC per distinct path of a step, counted on the wire,
// when the engine's per-step memo sits in front of FS.
func TestOneRPCPerDistinctPath(t *testing.T) {
	ctx := context.Background()
	c := hdfstest.Shared(t)
	proxy := startRPCProxy(t, c.Addr())
	f := hdfscheck.New(nil, hdfscheck.Options{User: c.User()})
	defer f.Close()
	fsURI := "hdfs://" + proxy.addr
	mkfile(t, c, "/"+t.Name()+"/in/7/_READY")
	memo := trigger.NewMemo(f)
	ready := 0
	for i := 0; i < 500; i++ {
		ok, err := memo.Exists(ctx, fsURI, fmt.Sprintf("/%s/in/%d/_READY", t.Name(), i%100))
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			ready++
		}
	}
	if ready != 5 {
		t.Errorf("%d of 500 checks ready; want 5", ready)
	}
	if got := proxy.count("getFileInfo"); got != 100 {
		t.Errorf("%d getFileInfo RPCs reached the NameNode for 500 checks of 100 paths; want 100", got)
	}
	if st := f.Stats(); st.Calls != 100 || st.Connects != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestNameNodeOutage(t *testing.T) {
	ctx := context.Background()
	c := hdfstest.StartT(t, hdfstest.Options{})
	mkfile(t, c, "/data/_READY")
	f := hdfscheck.New(nil, hdfscheck.Options{User: c.User(), CallTimeout: 5 * time.Second, CoolDown: 500 * time.Millisecond})
	defer f.Close()
	fsURI := "hdfs://" + c.Addr()
	if ok, err := f.Exists(ctx, fsURI, "/data/_READY"); !ok || err != nil {
		t.Fatalf("before the outage: %v, %v", ok, err)
	}
	if err := c.StopNameNode(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		ok, err := f.Exists(ctx, fsURI, "/data/_READY")
		if ok || err == nil {
			t.Fatalf("NameNode down: Exists = %v, %v; want not ready with an error", ok, err)
		}
		if !strings.Contains(err.Error(), c.Addr()) && !strings.Contains(err.Error(), "hdfs://") {
			t.Errorf("the error does not name the file system: %v", err)
		}
	}
	if err := c.StartNameNode(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := f.Exists(ctx, fsURI, "/data/_READY")
		if ok && err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery 30s after the NameNode came back: %v, %v", ok, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st := f.Stats(); st.Errors < 3 || st.Connects < 2 {
		t.Errorf("stats %+v: want the errors counted and a reconnection", st)
	}
}

// A NameNode that accepts connections but never answers costs one call
// timeout, then fails fast during the cool-down.
func TestHungNameNode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // hold it open, say nothing
		}
	}()
	f := hdfscheck.New(nil, hdfscheck.Options{User: "celos", CallTimeout: 300 * time.Millisecond, CoolDown: time.Minute})
	defer f.Close()
	// The first check ends with the call timeout (without it, it would
	// hang on the silent listener); the second, inside the cool-down,
	// fails without connecting again.
	for i := 0; i < 2; i++ {
		ok, err := f.Exists(context.Background(), "hdfs://"+ln.Addr().String(), "/x")
		if ok || err == nil {
			t.Fatalf("hung NameNode: %v, %v", ok, err)
		}
		if i == 1 && !strings.Contains(err.Error(), "not retried for") {
			t.Errorf("check during the cool-down: %v; want the last failure, not retried", err)
		}
	}
	if st := f.Stats(); st.Connects != 1 {
		t.Errorf("stats %+v: want one connection attempt, none during the cool-down", st)
	}
	// Nothing listening at all.
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln2.Addr().String()
	ln2.Close()
	if _, err := f.Exists(context.Background(), "hdfs://"+addr, "/x"); err == nil || !strings.Contains(err.Error(), "connect") {
		t.Errorf("no NameNode: %v", err)
	}
}
