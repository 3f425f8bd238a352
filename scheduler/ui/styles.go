package ui

import "github.com/celos-go/celos/scheduler/slot"

// status presentation: CSS class (one letter, to keep a 1,000-row page
// small), the glyph the stylesheet draws, the name, and the rank that picks a
// bucket's worst state (higher is worse).
type statusStyle struct {
	Status slot.Status
	Class  string
	Glyph  string
	Name   string
	rank   uint8
}

var styles = []statusStyle{
	{slot.Success, "s", "✓", "success", 1},
	{slot.Waiting, "w", "·", "waiting", 2},
	{slot.Ready, "r", "R", "ready", 3},
	{slot.Running, "u", "▶", "running", 4},
	{slot.Killed, "k", "K", "killed", 5},
	{slot.WaitTimeout, "t", "T", "wait timeout", 6},
	{slot.Failure, "f", "✕", "failure", 7},
}

// styleByRank is indexed by rank; styleOf maps a status to its style.
var (
	styleByRank [8]*statusStyle
	styleIndex  = map[slot.Status]*statusStyle{}
)

func init() {
	for i := range styles {
		styleByRank[styles[i].rank] = &styles[i]
		styleIndex[styles[i].Status] = &styles[i]
	}
}

func styleOf(s slot.Status) *statusStyle {
	if st, ok := styleIndex[s]; ok {
		return st
	}
	return styleIndex[slot.Waiting]
}
