package server

import (
	"io"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/metrics"
	"github.com/celos-go/celos/scheduler/ui"
)

// backgroundLoader is a state store that reads the state of its
// workflows in the background (statedb.DB).
type backgroundLoader interface {
	LoadInBackground(wfs []string, workers int) <-chan struct{}
	Loading() bool
	ui.StateLoader
}

// startStateLoad starts reading the state of every loaded workflow in the
// background at once, when the store can (the file store: at 10,000 hourly
// workflows with a full window that is 1.68 million files, about 20 s),
// rather than at the first step, which then finds it running or done (and
// without --autoSchedule comes only with the first POST /scheduler). It
// returns the store for the UI, which does not wait for the workflows not
// read yet (docs/ui.md), and a channel closed when the read ended; both
// nil when the store reads on first use only. The metrics m leave the
// workflows not read yet out of their counts too.
func startStateLoad(store io.Closer, svc scheduler.Service, m *metrics.Metrics) (ui.StateLoader, <-chan struct{}) {
	bl, ok := store.(backgroundLoader)
	if !ok {
		return nil, nil
	}
	done := bl.LoadInBackground(svc.WorkflowIDs(), 8)
	m.StateLoading(bl) // (a nil ui.StateLoader would not be a nil Loading)
	return bl, done
}
