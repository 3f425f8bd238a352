package cluster

import "errors"

// ErrFenced is wrapped by Check's refusals.
//
// TEMPORARY: the contract (PG.md) declares it as statepg.ErrFenced, with
// the statepg.Fence interface, in scheduler/statepg/fence.go (pg13). Until
// that lands on main this package declares it itself; then this file goes
// and ErrFenced becomes statepg.ErrFenced (fence_contract_test.go checks
// the interface shape meanwhile).
var ErrFenced = errors.New("fenced: this instance no longer holds the workflow's lease")
