package ui

import (
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
)

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

// unreadableStyle is a slot whose stored record cannot be read: no status,
// and the worst rank, so that a cell holding one shows it (a rerun or kill
// of the slot rewrites the record).
var unreadableStyle = statusStyle{Class: "q", Glyph: "?", Name: "unreadable", rank: 8}

// legend is what the grid's legend lists: every status, and unreadable.
var legend = append(append([]statusStyle(nil), styles...), unreadableStyle)

// styleByRank is indexed by rank; styleOf maps a status to its style.
var (
	styleByRank [9]*statusStyle
	styleIndex  = map[slot.Status]*statusStyle{}
)

func init() {
	for i := range styles {
		styleByRank[styles[i].rank] = &styles[i]
		styleIndex[styles[i].Status] = &styles[i]
	}
	styleByRank[unreadableStyle.rank] = &unreadableStyle
}

// listedStyle is the style of a listed slot: unreadable, or its status's.
func listedStyle(s *scheduler.ListedSlot) *statusStyle {
	if s.Unreadable != nil {
		return &unreadableStyle
	}
	return styleOf(s.Status)
}

func styleOf(s slot.Status) *statusStyle {
	if st, ok := styleIndex[s]; ok {
		return st
	}
	return styleIndex[slot.Waiting]
}
