package statepg

// The checksum of a copy (Summary.Checksum): every record of a side,
// listed in a canonical order, one line each, and hashed. The lines are
// appended to one reused buffer and written to the hash, not formatted
// with fmt into a string per workflow: the listing is what a migrate's
// verification allocated most.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"time"
)

// digest lists a side in a canonical order and returns its counts and the
// sha256 of the listing.
func digest(s side) (Counts, string, error) {
	var c Counts
	h := sha256.New()
	wfs, err := s.workflows()
	if err != nil {
		return c, "", err
	}
	owners, err := s.owners()
	if err != nil {
		return c, "", err
	}
	var buf []byte
	for _, wf := range wfs {
		r, err := s.records(wf, owners)
		if err != nil {
			return c, "", fmt.Errorf("workflow %s: %w", wf, err)
		}
		buf = appendRecords(buf[:0], wf, r)
		h.Write(buf)
		c.Workflows++
		c.States += len(r.States)
		c.Marks += len(r.Marks)
		c.Intents += len(r.Intents)
		if r.Paused {
			c.Paused++
		}
		if r.Owner != nil {
			c.Owners++
		}
		c.Runs += len(r.Runs)
	}
	bs, err := s.buckets()
	if err != nil {
		return c, "", err
	}
	for _, b := range bs {
		keys, err := s.regs.RegisterKeys(b, "")
		if err != nil {
			return c, "", err
		}
		for _, k := range keys {
			v, err := s.regs.GetRegister(b, k)
			if err != nil {
				return c, "", err
			}
			// G "bucket" "key" len value
			buf = append(buf[:0], 'G', ' ')
			buf = strconv.AppendQuote(buf, b)
			buf = append(buf, ' ')
			buf = strconv.AppendQuote(buf, k)
			buf = append(buf, ' ')
			buf = strconv.AppendInt(buf, int64(len(v)), 10)
			buf = append(buf, ' ')
			buf = append(buf, v...)
			buf = append(buf, '\n')
			h.Write(buf)
			c.Registers++
		}
	}
	return c, hex.EncodeToString(h.Sum(nil)), nil
}

// lister compares records by their listings (appendRecords), in two
// buffers it reuses.
type lister struct{ a, b []byte }

// same reports whether r and d list the same.
func (l *lister) same(wf string, r, d Records) bool {
	l.a = appendRecords(l.a[:0], wf, r)
	l.b = appendRecords(l.b[:0], wf, d)
	return bytes.Equal(l.a, l.b)
}

// appendRecords appends the canonical listing of one workflow's records
// to buf, one line a record: S (slot state), R (rerun mark), I (submit
// intent), P (paused), O (owner), N (recorded submission), each with the
// workflow's id quoted and times in Unix milliseconds.
func appendRecords(buf []byte, wf string, r Records) []byte {
	line := func(tag byte) {
		buf = append(buf, tag, ' ')
		buf = strconv.AppendQuote(buf, wf)
	}
	num := func(n int64) {
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, n, 10)
	}
	str := func(s string) {
		buf = append(buf, ' ')
		buf = strconv.AppendQuote(buf, s)
	}
	for _, st := range r.States {
		line('S')
		num(key(st.ID.Time))
		buf = append(append(buf, ' '), st.Status...)
		str(st.ExternalID)
		num(int64(st.RetryCount))
		buf = append(buf, '\n')
	}
	for _, m := range r.Marks {
		line('R')
		num(key(m.Slot))
		num(key(m.At))
		buf = append(buf, '\n')
	}
	ts := make([]time.Time, 0, len(r.Intents))
	for t := range r.Intents {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	for _, t := range ts {
		line('I')
		num(key(t))
		num(int64(r.Intents[t].Attempt))
		num(key(r.Intents[t].Time))
		buf = append(buf, '\n')
	}
	if r.Paused {
		line('P')
		buf = append(buf, '\n')
	}
	if r.Owner != nil {
		line('O')
		str(r.Owner.Project)
		str(r.Owner.File)
		buf = append(buf, '\n')
	}
	for _, k := range sortedRuns(r.Runs) {
		line('N')
		num(k.slot)
		num(k.attempt)
		num(k.at)
		buf = append(buf, '\n')
	}
	return buf
}
