package workflow

// The checks of the data-volume, failure, sinceLast and event triggers.

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// MaxBytes bounds minBytes of a dataVolume trigger (8 EiB − 1, the largest
// int64): larger sizes are vet errors, not overflows.
const MaxBytes int64 = 1<<63 - 1

// ErrBadGlob: a dataVolume path is not a glob celos can list in one call.
var ErrBadGlob = errors.New("bad dataVolume glob")

// GlobDir splits a dataVolume path into the directory that is listed and
// the pattern (path.Match syntax: * ? [...]) its entries' names must
// match. Only the last element may hold wildcards, so that one listing
// answers the trigger: "/in/${year}/part-*" lists "/in/${year}".
func GlobDir(p string) (dir, pattern string, err error) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "", "", fmt.Errorf("%w: path %q must contain a directory (\"/in/part-*\")", ErrBadGlob, clip(p))
	}
	dir, pattern = p[:i], p[i+1:]
	if dir == "" {
		dir = "/"
	}
	if pattern == "" {
		return "", "", fmt.Errorf("%w: path %q ends with /; name the files (\"%s*\")", ErrBadGlob, clip(p), clip(p))
	}
	if strings.ContainsAny(dir, "*?[") {
		return "", "", fmt.Errorf("%w: path %q has wildcards before its last element; only file names may be globbed", ErrBadGlob, clip(p))
	}
	if _, err := path.Match(pattern, ""); err != nil {
		return "", "", fmt.Errorf("%w: path %q: the pattern %q is malformed", ErrBadGlob, clip(p), clip(pattern))
	}
	return dir, pattern, nil
}

// CheckRegisterName checks an event trigger's bucket or key (kind) with
// the rules of the state database: not empty, at most 255 bytes, no '/',
// '\', '.' or control characters. The slot-time variables of a key count
// as the digits they become.
func CheckRegisterName(kind, s string) error {
	x := s
	for _, v := range []string{"${year}", "${month}", "${day}", "${hour}", "${minute}", "${second}", "${millisecond}"} {
		x = strings.ReplaceAll(x, v, "0000")
	}
	if x == "" {
		return fmt.Errorf("event trigger needs a %s", kind)
	}
	if len(x) > 255 {
		return fmt.Errorf("event trigger: %s %q is longer than 255 bytes", kind, clip(s))
	}
	for _, r := range x {
		if r == '/' || r == '\\' || r == '.' || r < 0x20 || r == 0x7f {
			return fmt.Errorf("event trigger: %s %q may not contain '/', '\\', '.' or control characters", kind, clip(s))
		}
	}
	return nil
}

// validateNew checks the triggers of this file; known is false for any
// other type.
func (t *Trigger) validateNew() (known bool, err error) {
	switch t.Type {
	case TriggerDataVolume:
		if t.Path == "" {
			return true, errors.New("dataVolume trigger needs a path")
		}
		if _, _, err := GlobDir(t.Path); err != nil {
			return true, err
		}
		if t.MinFiles == nil || t.MinBytes == nil {
			return true, errors.New("dataVolume trigger needs minFiles and minBytes (the compiler writes both)")
		}
		if *t.MinFiles < 0 {
			return true, fmt.Errorf("dataVolume trigger: minFiles %d must not be negative", *t.MinFiles)
		}
		if *t.MinBytes < 0 {
			return true, fmt.Errorf("dataVolume trigger: minBytes %d must not be negative", *t.MinBytes)
		}
	case TriggerFailure:
		if !IDPattern.MatchString(t.Workflow) {
			return true, fmt.Errorf("failure trigger: workflow %q is not a valid id", clip(t.Workflow))
		}
	case TriggerSinceLast:
		if !IDPattern.MatchString(t.Workflow) {
			return true, fmt.Errorf("sinceLast trigger: workflow %q is not a valid id", clip(t.Workflow))
		}
		if t.Seconds < 1 || t.Seconds > MaxTriggerSeconds {
			return true, fmt.Errorf("sinceLast trigger: seconds %d must be between 1 and %d (100 years)", t.Seconds, MaxTriggerSeconds)
		}
	case TriggerEvent:
		if err := CheckRegisterName("bucket", t.Bucket); err != nil {
			return true, err
		}
		if err := CheckRegisterName("key", t.Key); err != nil {
			return true, err
		}
	default:
		return false, nil
	}
	if len(t.Triggers) > 0 || t.Trigger != nil {
		return true, fmt.Errorf("%s trigger has no nested triggers", t.Type)
	}
	return true, nil
}
