//go:build race

package ui

// raceEnabled: the race detector slows everything down ~10x; timing budgets do not apply.
const raceEnabled = true
