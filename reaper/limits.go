package reaper

import (
	"github.com/depwatch/depwatch/internal/apilimit"
	"github.com/depwatch/depwatch/internal/envconf"
)

// The client-side rate limits of a run: one for what it reads and deletes, one of its own for
// its Events, so a delete never waits behind an Event (each reaped pod gets one).
const (
	envKubeAPIQPS         = "KUBE_API_QPS"
	envKubeAPIBurst       = "KUBE_API_BURST"
	envKubeAPIEventsQPS   = "KUBE_API_EVENTS_QPS"
	envKubeAPIEventsBurst = "KUBE_API_EVENTS_BURST"
)

// ClientLimits are a run's API rate limits; an unset (zero) half takes its default
// (DefaultClientLimits), so a run for one service needs none of them.
type ClientLimits struct {
	API    apilimit.Limit // KUBE_API_QPS, KUBE_API_BURST
	Events apilimit.Limit // KUBE_API_EVENTS_QPS, KUBE_API_EVENTS_BURST
}

// DefaultClientLimits are a run's limits where the environment sets none: client-go's
// default, which pod-reaper runs with, for each of the two clients.
var DefaultClientLimits = ClientLimits{API: apilimit.Default, Events: apilimit.Default}

// Effective is what the run's clients use: l with DefaultClientLimits where unset.
func (l ClientLimits) Effective() ClientLimits {
	return ClientLimits{API: l.API.Or(DefaultClientLimits.API), Events: l.Events.Or(DefaultClientLimits.Events)}
}

func loadClientLimits(e *envconf.Reader) ClientLimits {
	return ClientLimits{
		API:    apilimit.Read(e, envKubeAPIQPS, envKubeAPIBurst),
		Events: apilimit.Read(e, envKubeAPIEventsQPS, envKubeAPIEventsBurst),
	}
}

func (l ClientLimits) write(w *envconf.Writer) {
	l.API.Write(w, envKubeAPIQPS, envKubeAPIBurst)
	l.Events.Write(w, envKubeAPIEventsQPS, envKubeAPIEventsBurst)
}
