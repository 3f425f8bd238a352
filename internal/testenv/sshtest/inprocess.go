package sshtest

import (
	"net"
	"testing"

	"github.com/pkg/sftp"
)

// InProcess returns an sftp client served by pkg/sftp's server in this
// process over an in-memory pipe (no ssh, no daemon). It serves the real
// file system with relative paths resolved under dir; use absolute paths
// under dir (e.g. t.TempDir()) in tests. Closed at the end of the test.
func InProcess(t testing.TB, dir string) *sftp.Client {
	t.Helper()
	a, b := net.Pipe()
	srv, err := sftp.NewServer(a, sftp.WithServerWorkingDirectory(dir))
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	return pipeClient(t, b, func() { srv.Close() })
}

// InMemory returns an sftp client served by pkg/sftp's in-memory request
// server (sftp.InMemHandler): nothing touches the disk. Closed at the end of
// the test.
func InMemory(t testing.TB) *sftp.Client {
	t.Helper()
	return RequestServer(t, sftp.InMemHandler())
}

// RequestServer returns an sftp client served by pkg/sftp's request server
// with the given handlers, e.g. InMemHandler wrapped to inject failures.
// Closed at the end of the test.
func RequestServer(t testing.TB, h sftp.Handlers) *sftp.Client {
	t.Helper()
	a, b := net.Pipe()
	srv := sftp.NewRequestServer(a, h)
	go srv.Serve()
	return pipeClient(t, b, func() { srv.Close() })
}

func pipeClient(t testing.TB, conn net.Conn, closeServer func()) *sftp.Client {
	t.Helper()
	cl, err := sftp.NewClientPipe(conn, conn)
	if err != nil {
		closeServer()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cl.Close()
		closeServer()
	})
	return cl
}
