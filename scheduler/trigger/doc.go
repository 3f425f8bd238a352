// Package trigger evaluates workflow triggers (hdfsCheck, success, and,
// or, not, offset, delay, always, dataVolume, failure, sinceLast, event)
// for a slot and explains the result as a Status tree.
package trigger
