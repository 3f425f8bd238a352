// Package storetest is the conformance suite of celos's state stores: the
// file store (scheduler/statedb) and the PostgreSQL store
// (scheduler/statepg) each run it on themselves, so that the promises the
// engine and the API rely on are written once and kept by both.
package storetest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/scheduler/store"
)

// Registers is what a state store offers for registers: the API's
// register calls, the engine's event-trigger lookups and its batches.
type Registers interface {
	GetRegister(bucket, key string) (json.RawMessage, error)
	PutRegister(bucket, key string, value json.RawMessage) error
	DeleteRegister(bucket, key string) error
	DeleteRegistersWithPrefix(bucket, prefix string) error
	RegisterKeys(bucket, prefix string) ([]string, error)
	HasRegister(bucket, key string) (bool, error)
	PutRegisters(bucket string, kv map[string]json.RawMessage) map[string]error
	DeleteRegisters(bucket string, keys []string) map[string]error
	Close() error
}

// RunRegisters runs the register suite; open returns a new, empty store
// (closed by the test's cleanup as well as by the suite when it needs).
func RunRegisters(t *testing.T, open func(t *testing.T) Registers) {
	t.Run("BatchAsOneByOne", func(t *testing.T) { batchAsOneByOne(t, open(t), open(t)) })
	t.Run("Names", func(t *testing.T) { names(t, open(t)) })
	t.Run("Values", func(t *testing.T) { values(t, open(t)) })
	t.Run("Listing", func(t *testing.T) { listing(t, open(t)) })
	t.Run("Closed", func(t *testing.T) { closed(t, open(t)) })
}

// Contents reads every key of bucket.
func Contents(t *testing.T, db Registers, bucket string) map[string]string {
	t.Helper()
	keys, err := db.RegisterKeys(bucket, "")
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]string, len(keys))
	for _, k := range keys {
		v, err := db.GetRegister(bucket, k)
		if err != nil {
			t.Fatal(err)
		}
		got[k] = string(v)
	}
	return got
}

// batchAsOneByOne: PutRegisters leaves the bucket as PutRegister of each
// key would (new keys, a key replaced, the bytes as given), and refuses a
// bad key or value by itself, writing the others; so do DeleteRegisters
// and DeleteRegister.
func batchAsOneByOne(t *testing.T, one, batch Registers) {
	for _, db := range []Registers{one, batch} {
		if err := db.PutRegister("b", "old", json.RawMessage(`{"v": 0}`)); err != nil {
			t.Fatal(err)
		}
	}
	kv := map[string]json.RawMessage{"old": json.RawMessage(`{"v": 1}`), "k1": json.RawMessage(`[1, 2]`), "k2": json.RawMessage(`"x é"`)}
	for k, v := range kv {
		if err := one.PutRegister("b", k, v); err != nil {
			t.Fatal(err)
		}
	}
	all := map[string]json.RawMessage{"bad.key": json.RawMessage(`1`), "badvalue": json.RawMessage(`{`)}
	for k, v := range kv {
		all[k] = v
	}
	failed := batch.PutRegisters("b", all)
	if len(failed) != 2 || !errors.Is(failed["bad.key"], store.ErrBadName) || !errors.Is(failed["badvalue"], store.ErrBadName) {
		t.Fatalf("PutRegisters failed: %v", failed)
	}
	if d := cmp.Diff(Contents(t, one, "b"), Contents(t, batch, "b")); d != "" {
		t.Errorf("bucket after PutRegister each (-) and PutRegisters (+):\n%s", d)
	}
	if failed := batch.PutRegisters("b", nil); failed != nil {
		t.Errorf("an empty batch: %v", failed)
	}
	for _, k := range []string{"old", "k2", "missing"} {
		if err := one.DeleteRegister("b", k); err != nil {
			t.Fatal(err)
		}
	}
	failed = batch.DeleteRegisters("b", []string{"old", "k2", "missing", "bad/key"})
	if len(failed) != 1 || !errors.Is(failed["bad/key"], store.ErrBadName) {
		t.Fatalf("DeleteRegisters failed: %v", failed)
	}
	if d := cmp.Diff(Contents(t, one, "b"), Contents(t, batch, "b")); d != "" {
		t.Errorf("bucket after DeleteRegister each (-) and DeleteRegisters (+):\n%s", d)
	}
	if failed := batch.DeleteRegisters("nobucket", []string{"k"}); failed != nil {
		t.Errorf("removal in a bucket that does not exist: %v", failed)
	}
}

// badNames are refused as a bucket and as a key by every call.
var badNames = map[string]string{
	"empty":          "",
	"slash":          "a/b",
	"backslash":      `a\b`,
	"dot":            "a.b",
	"dot-dot":        "..",
	"newline":        "a\nb",
	"NUL":            "a\x00b",
	"DEL":            "a\x7fb",
	"not UTF-8":      "a\xffb",
	"256 bytes":      strings.Repeat("k", 256),
	"only a dot":     ".",
	"a tab":          "a\tb",
	"escape (ESC)":   "a\x1bb",
	"surrogate half": "a\xed\xa0\x80b",
}

// goodNames round-trip as buckets and keys.
var goodNames = []string{"k", "with space", "ünïcødé-名前", "-leading-dash", strings.Repeat("k", 255), "~$@!#%&()[]{}=+,;'`"}

// names: a bad bucket, key or key prefix is refused by every call with
// store.ErrBadName (HasRegister: a bad key is in no bucket), and nothing is
// written; good ones, odd as they look, round-trip.
func names(t *testing.T, db Registers) {
	v := json.RawMessage(`1`)
	for what, bad := range badNames {
		if err := db.PutRegister("b", bad, v); !errors.Is(err, store.ErrBadName) {
			t.Errorf("PutRegister of key %s: %v, want ErrBadName", what, err)
		}
		if err := db.PutRegister(bad, "k", v); !errors.Is(err, store.ErrBadName) {
			t.Errorf("PutRegister in bucket %s: %v, want ErrBadName", what, err)
		}
		if _, err := db.GetRegister("b", bad); !errors.Is(err, store.ErrBadName) {
			t.Errorf("GetRegister of key %s: %v, want ErrBadName", what, err)
		}
		if err := db.DeleteRegister("b", bad); !errors.Is(err, store.ErrBadName) {
			t.Errorf("DeleteRegister of key %s: %v, want ErrBadName", what, err)
		}
		if _, err := db.RegisterKeys(bad, ""); !errors.Is(err, store.ErrBadName) {
			t.Errorf("RegisterKeys of bucket %s: %v, want ErrBadName", what, err)
		}
		if bad != "" { // "" is every key
			if _, err := db.RegisterKeys("b", bad); !errors.Is(err, store.ErrBadName) {
				t.Errorf("RegisterKeys with prefix %s: %v, want ErrBadName", what, err)
			}
			if err := db.DeleteRegistersWithPrefix("b", bad); !errors.Is(err, store.ErrBadName) {
				t.Errorf("DeleteRegistersWithPrefix %s: %v, want ErrBadName", what, err)
			}
		}
		if has, err := db.HasRegister("b", bad); has || err != nil {
			t.Errorf("HasRegister of key %s: %v, %v, want false, nil", what, has, err)
		}
		if _, err := db.HasRegister(bad, "k"); !errors.Is(err, store.ErrBadName) {
			t.Errorf("HasRegister in bucket %s: %v, want ErrBadName", what, err)
		}
		if failed := db.PutRegisters("b", map[string]json.RawMessage{bad: v}); !errors.Is(failed[bad], store.ErrBadName) {
			t.Errorf("PutRegisters of key %s: %v, want ErrBadName", what, failed)
		}
		if failed := db.DeleteRegisters("b", []string{bad}); !errors.Is(failed[bad], store.ErrBadName) {
			t.Errorf("DeleteRegisters of key %s: %v, want ErrBadName", what, failed)
		}
	}
	if got := Contents(t, db, "b"); len(got) != 0 {
		t.Errorf("bad names wrote %v", got)
	}
	for _, name := range goodNames {
		if err := db.PutRegister(name, name, v); err != nil {
			t.Errorf("PutRegister %q/%q: %v", name, name, err)
			continue
		}
		if has, err := db.HasRegister(name, name); !has || err != nil {
			t.Errorf("HasRegister %q/%q after a put: %v, %v", name, name, has, err)
		}
		if d := cmp.Diff(map[string]string{name: "1"}, Contents(t, db, name)); d != "" {
			t.Errorf("bucket %q (-want +got):\n%s", name, d)
		}
	}
}

// values: a value is kept byte for byte (spacing, key order, escapes,
// numbers as written) up to store.MaxRegisterBytes; what is not one JSON
// text in UTF-8, or is larger, is refused with store.ErrBadName and writes
// nothing.
func values(t *testing.T, db Registers) {
	good := []string{
		`{"b": 1,   "a": [true, null]}`,
		"\n  \"spaced\"\t",
		`1.0e2`,
		`-0`,
		`12345678901234567890123456789`,
		`"\u00e9 é \ud83d\ude00 😀"`,
		`"a literal backslash-u: \\u0000"`,
		`"\u0000"`,
		`"\u001f \/ \b"`,
		`{"a": 1, "a": 2}`,
		`"` + strings.Repeat("x", store.MaxRegisterBytes-2) + `"`, // the largest
	}
	for i, v := range good {
		key := "v" + strings.Repeat("x", i)
		if err := db.PutRegister("values", key, json.RawMessage(v)); err != nil {
			t.Errorf("PutRegister of %.60q: %v", v, err)
			continue
		}
		got, err := db.GetRegister("values", key)
		if err != nil {
			t.Errorf("GetRegister of %.60q: %v", v, err)
			continue
		}
		if string(got) != v {
			t.Errorf("value %.60q read back as %.60q", v, got)
		}
	}
	bad := []string{``, `{`, `1 2`, `'x'`, "\"raw\x00NUL\"", "\"\xff\"", `NaN`, `{"a":1}x`, `"` + strings.Repeat("x", store.MaxRegisterBytes-1) + `"`}
	for _, v := range bad {
		if err := db.PutRegister("bad", "k", json.RawMessage(v)); !errors.Is(err, store.ErrBadName) {
			t.Errorf("PutRegister of %.60q: %v, want ErrBadName", v, err)
		}
		if failed := db.PutRegisters("bad", map[string]json.RawMessage{"k": json.RawMessage(v)}); !errors.Is(failed["k"], store.ErrBadName) {
			t.Errorf("PutRegisters of %.60q: %v, want ErrBadName", v, failed)
		}
	}
	if got := Contents(t, db, "bad"); len(got) != 0 {
		t.Errorf("bad values wrote %v", got)
	}
}

// listing: RegisterKeys lists by prefix, sorted by byte; HasRegister
// agrees with it; DeleteRegistersWithPrefix removes exactly what the
// listing of that prefix shows; an unknown bucket holds nothing and a
// missing key is ErrNotFound.
func listing(t *testing.T, db Registers) {
	keys := []string{"b", "a-2", "a-10", "a-1", "A", "é", "z", "a"}
	for _, k := range keys {
		if err := db.PutRegister("l", k, json.RawMessage(`0`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.PutRegister("other", "a-3", json.RawMessage(`0`)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"A", "a", "a-1", "a-10", "a-2", "b", "z", "é"}},
		{"a-", []string{"a-1", "a-10", "a-2"}},
		{"a-1", []string{"a-1", "a-10"}},
		{"x", []string{}},
	} {
		got, err := db.RegisterKeys("l", c.prefix)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("RegisterKeys(l, %q) (-want +got):\n%s", c.prefix, d)
		}
	}
	for _, k := range []string{"a-1", "é", "a-3", "missing", "A-1"} {
		has, err := db.HasRegister("l", k)
		if err != nil {
			t.Fatal(err)
		}
		listed, _ := db.RegisterKeys("l", k)
		if want := len(listed) > 0 && listed[0] == k; has != want {
			t.Errorf("HasRegister(l, %q) = %v, listed: %v", k, has, listed)
		}
	}
	if err := db.DeleteRegistersWithPrefix("l", "a-1"); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteRegistersWithPrefix("nobucket", "a"); err != nil {
		t.Errorf("DeleteRegistersWithPrefix in an unknown bucket: %v", err)
	}
	if err := db.DeleteRegistersWithPrefix("l", "a.b"); !errors.Is(err, store.ErrBadName) {
		t.Errorf("DeleteRegistersWithPrefix with a dot: %v, want ErrBadName", err)
	}
	got, err := db.RegisterKeys("l", "")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"A", "a", "a-2", "b", "z", "é"}, got); d != "" {
		t.Errorf("after removing prefix a-1 (-want +got):\n%s", d)
	}
	if has, err := db.HasRegister("l", "a-10"); has || err != nil {
		t.Errorf("HasRegister of a removed key: %v, %v", has, err)
	}
	if _, err := db.GetRegister("l", "a-10"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetRegister of a removed key: %v, want ErrNotFound", err)
	}
	if got, err := db.RegisterKeys("nobucket", ""); err != nil || got == nil || len(got) != 0 {
		t.Errorf("RegisterKeys of an unknown bucket: %#v, %v; want an empty list", got, err)
	}
	if has, err := db.HasRegister("nobucket", "k"); has || err != nil {
		t.Errorf("HasRegister in an unknown bucket: %v, %v", has, err)
	}
	if err := db.DeleteRegister("nobucket", "k"); err != nil {
		t.Errorf("DeleteRegister of a missing key: %v", err)
	}
}

// closed: every call on a closed store fails (a batch: every key).
func closed(t *testing.T, db Registers) {
	if err := db.PutRegister("b", "a", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetRegister("b", "a"); err == nil {
		t.Error("GetRegister on a closed store: no error")
	}
	if err := db.PutRegister("b", "c", json.RawMessage(`1`)); err == nil {
		t.Error("PutRegister on a closed store: no error")
	}
	if err := db.DeleteRegister("b", "a"); err == nil {
		t.Error("DeleteRegister on a closed store: no error")
	}
	if _, err := db.RegisterKeys("b", ""); err == nil {
		t.Error("RegisterKeys on a closed store: no error")
	}
	if _, err := db.HasRegister("b", "a"); err == nil {
		t.Error("HasRegister on a closed store: no error")
	}
	if failed := db.PutRegisters("b", map[string]json.RawMessage{"a": json.RawMessage(`1`), "b": json.RawMessage(`2`)}); len(failed) != 2 || failed["a"] == nil || failed["b"] == nil {
		t.Errorf("PutRegisters on a closed store: %v", failed)
	}
	if failed := db.DeleteRegisters("b", []string{"a"}); failed["a"] == nil {
		t.Errorf("DeleteRegisters on a closed store: %v", failed)
	}
	if err := db.DeleteRegistersWithPrefix("b", ""); err == nil {
		t.Error("DeleteRegistersWithPrefix on a closed store: no error")
	}
}

// Buckets is a Registers that lists its buckets (celos db export and
// migrate copy them).
type Buckets interface {
	Registers
	RegisterBuckets() ([]string, error)
}

// RunBuckets runs the bucket listing suite; open returns a new, empty
// store.
func RunBuckets(t *testing.T, open func(t *testing.T) Buckets) {
	db := open(t)
	if got, err := db.RegisterBuckets(); err != nil || len(got) != 0 {
		t.Errorf("buckets of an empty store: %v, %v", got, err)
	}
	for _, b := range []string{"kept", "emptied", "prefix-emptied", "batch-emptied", "é", "A"} {
		if err := db.PutRegister(b, "k", json.RawMessage(`1`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.DeleteRegister("emptied", "k"); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteRegistersWithPrefix("prefix-emptied", ""); err != nil {
		t.Fatal(err)
	}
	if failed := db.DeleteRegisters("batch-emptied", []string{"k"}); failed != nil {
		t.Fatal(failed)
	}
	got, err := db.RegisterBuckets()
	if err != nil {
		t.Fatal(err)
	}
	// A bucket is the buckets that hold a key: one emptied is gone, as
	// an unknown one (RegisterKeys of it is empty either way).
	if d := cmp.Diff([]string{"A", "kept", "é"}, got); d != "" {
		t.Errorf("RegisterBuckets (-want +got):\n%s", d)
	}
}
