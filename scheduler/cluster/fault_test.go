package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/child"
	"github.com/celos-go/celos/internal/testenv/pgtest"
)

// TestPausedHolderIsFenced: the holder of a lease is a real process,
// stopped with SIGSTOP past its lease. Another instance takes the workflow
// over; when the stopped one is continued, it no longer owns the workflow
// (no submission) and its write, made with the token it still remembers,
// is refused by the database.
func TestPausedHolderIsFenced(t *testing.T) {
	const lease = time.Second
	if child.Is(t) {
		pausedHolder(t, os.Getenv("CELOS_TEST_DSN"), lease)
		return
	}
	dsn := newDB(t)
	pool := openPool(t, dsn)
	cmd := child.Command(t, "CELOS_TEST_DSN="+dsn)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := childLines(stdout)
	expectLine(t, lines, "HOLDING wf")
	pid := cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	b := member(t, pool, "b", lease, "wf")
	eventually(t, time.Minute, "b takes wf over from the stopped holder", func() bool {
		tick(t, b)
		return b.Owns("wf")
	})
	if err := write(ctxT(t), pool, b, "wf"); err != nil {
		t.Fatalf("the new holder's write: %v", err)
	}
	// Queue the stopped holder's next move, then let it run again.
	if _, err := io.WriteString(stdin, "write\n"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	expectLine(t, lines, "OWNS false")
	expectLine(t, lines, "WRITE fenced")
	var n int
	if err := pool.QueryRow(ctxT(t), `SELECT count(*) FROM writes WHERE instance = 'paused'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the paused holder's committed writes: %d (%v), want 0", n, err)
	}
	_, _ = io.WriteString(stdin, "exit\n")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
}

// pausedHolder is the child's side: hold wf (ticking in the background as
// a server does), then on "write" report whether it owns wf and try a
// write with the token it remembers.
func pausedHolder(t *testing.T, dsn string, lease time.Duration) {
	pool := openPool(t, dsn)
	c := member(t, pool, "paused", lease, "wf")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	eventually(t, time.Minute, "the child holds wf", func() bool { return c.Owns("wf") })
	c.mu.RLock()
	remembered := c.held["wf"]
	c.mu.RUnlock()
	fmt.Println("CHILD HOLDING wf")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "write":
			fmt.Printf("CHILD OWNS %v\n", c.Owns("wf"))
			// A write made by a step that began before the pause: with the
			// token it had then (a tick after SIGCONT may already have
			// dropped the lease from memory).
			c.mu.Lock()
			c.held["wf"] = remembered
			c.mu.Unlock()
			err := write(ctxT(t), pool, c, "wf")
			switch {
			case err == nil:
				fmt.Println("CHILD WRITE ok")
			case errors.Is(err, ErrFenced):
				fmt.Println("CHILD WRITE fenced")
			default:
				fmt.Printf("CHILD WRITE error %v\n", err)
			}
		case "exit":
			return
		}
	}
}

func childLines(r io.Reader) <-chan string {
	ch := make(chan string, 100)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "CHILD "); ok {
				ch <- line
			}
		}
	}()
	return ch
}

func expectLine(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	select {
	case got, ok := <-lines:
		if !ok {
			t.Fatalf("the child exited before saying %q", want)
		}
		if got != want {
			t.Fatalf("the child said %q, want %q", got, want)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the child did not say %q within 2 minutes", want)
	}
}

// TestPostgresKilledAndRestarted: while the database is down the holder
// renews nothing, and once its local deadline passes it owns nothing (it
// would step and submit nothing); when the database is back it takes its
// workflows again under new tokens, and a write with an old token is
// refused.
func TestPostgresKilledAndRestarted(t *testing.T) {
	srv := pgtest.StartT(t, pgtest.Options{})
	dsn := srv.CreateDB(t)
	applySchema(t, dsn)
	pool := openPool(t, dsn)
	const lease = time.Second
	wfs := []string{"wf-1", "wf-2", "wf-3"}
	a := member(t, pool, "a", lease, wfs...)
	tick(t, a)
	if got := a.Owned(); len(got) != 3 {
		t.Fatalf("a owns %v, want all three", got)
	}
	before := leases(t, pool)
	lastRenewal := time.Now()
	srv.Kill()
	ctx, cancel := contextWithTimeout(5 * time.Second)
	err := a.Tick(ctx)
	cancel()
	if err == nil {
		t.Fatal("a tick with the database down did not fail")
	}
	eventually(t, time.Minute, "a owns nothing once its deadline passed", func() bool { return len(a.Owned()) == 0 })
	// The outage outlasts the lease in the database too: a lease that has
	// not expired there is renewed under its token when the database
	// comes back (no one else could have taken it), which is not the case
	// tested here. On a fast machine the restart below would otherwise
	// come before the expiry.
	time.Sleep(time.Until(lastRenewal.Add(lease + lease/2)))
	if err := srv.Restart(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// A write with a token from before the outage is refused.
	stale, err := New(pool, Options{ID: "a", Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	stale.incarnation = a.incarnation
	stale.held["wf-1"] = heldLease{token: before["wf-1"].Token, deadline: time.Now().Add(time.Hour)}
	eventually(t, time.Minute, "a takes its workflows back", func() bool {
		return a.Tick(ctxT(t)) == nil && len(a.Owned()) == 3
	})
	after := leases(t, pool)
	for _, wf := range wfs {
		if after[wf].Token <= before[wf].Token {
			t.Errorf("%s: token %d after the outage, not above %d", wf, after[wf].Token, before[wf].Token)
		}
	}
	if err := write(ctxT(t), pool, stale, "wf-1"); !errors.Is(err, ErrFenced) {
		t.Fatalf("a write with the token from before the outage: %v, want ErrFenced", err)
	}
	if err := write(ctxT(t), pool, a, wfs...); err != nil {
		t.Fatalf("a write with the new tokens: %v", err)
	}
	if st := a.Stats(); st.TakeOvers != 3 || st.Lost != 3 {
		t.Errorf("stats %+v, want 3 lost and 3 taken over", st)
	}
}
