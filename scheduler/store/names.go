package store

// The rules for workflow ids and register buckets, keys, prefixes and
// values that every store applies alike, so that whatever one store accepts another can hold
// (celos db migrate, celos db export) and read back.

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// MaxRegisterBytes bounds a register's value (the API's PUT /register
// body too): a store refuses a larger one rather than write what it then
// could not read.
const MaxRegisterBytes = 1 << 20

// CheckName checks a register bucket or key (kind names which): not empty,
// at most 255 bytes, valid UTF-8, no '/', '\\', '.' or control character
// — so that it is a file name in the file store and text in a database.
// The error wraps ErrBadName.
func CheckName(kind, s string) error {
	if s == "" {
		return fmt.Errorf("%w: %s is empty", ErrBadName, kind)
	}
	if len(s) > 255 {
		return fmt.Errorf("%w: %s %.40q... is longer than 255 bytes", ErrBadName, kind, s)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrBadName, kind, s)
	}
	for _, r := range s {
		if r == '/' || r == '\\' || r == '.' || r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: %s %q may not contain '/', '\\', '.' or control characters", ErrBadName, kind, s)
		}
	}
	return nil
}

// CheckWorkflow checks a workflow id as a store keeps it: not empty, not
// starting with a dot ("." and ".." neither), at most 255 bytes, valid
// UTF-8, no '/', '\\' or control character ('.' inside is allowed: schema
// ids may hold dots; schema.IDPattern is narrower still). The error wraps
// ErrBadName.
func CheckWorkflow(id string) error {
	if id == "" || id[0] == '.' {
		return fmt.Errorf("%w: workflow id %q is empty or starts with a dot", ErrBadName, id)
	}
	if len(id) > 255 {
		return fmt.Errorf("%w: workflow id %.40q... is longer than 255 bytes", ErrBadName, id)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("%w: workflow id %q is not valid UTF-8", ErrBadName, id)
	}
	for _, r := range id {
		if r == '/' || r == '\\' || r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: workflow id %q may not contain '/', '\\' or control characters", ErrBadName, id)
		}
	}
	return nil
}

// CheckPrefix checks a key prefix ("" is every key): what a key may hold.
func CheckPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return CheckName("prefix", prefix)
}

// CheckValue checks a register's value: one JSON text in UTF-8 (escapes
// such as \u0000 are text like any other), at most MaxRegisterBytes. The
// error wraps ErrBadName and holds none of the value.
func CheckValue(value json.RawMessage) error {
	if len(value) > MaxRegisterBytes {
		return fmt.Errorf("%w: register value is %d bytes, more than %d", ErrBadName, len(value), MaxRegisterBytes)
	}
	if !json.Valid(value) {
		return fmt.Errorf("%w: register value is not valid JSON", ErrBadName)
	}
	if !utf8.Valid(value) {
		return fmt.Errorf("%w: register value is not valid UTF-8", ErrBadName)
	}
	return nil
}
