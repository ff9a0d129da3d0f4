package app

import (
	"log/slog"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// leaseLabels is what setLeaseLabels tells: the collector's concurrency limits in force.
type leaseLabels interface {
	SetNamedLeaseLimit(endpoint, tier, name string, lim limiter.LeaseLimit) error
}

// setLeaseLabels tells the collector the concurrency limits in force, after setLabels.
func setLeaseLabels(col leaseLabels, logger *slog.Logger, leases []httplimit.EndpointLease) {
	for _, l := range leases {
		if err := col.SetNamedLeaseLimit(l.Endpoint, l.PlanTier, l.Class, l.Limit); err != nil {
			logger.Warn("metrics: concurrency limit in force", slog.String("endpoint", l.Endpoint),
				slog.String("plan_tier", l.PlanTier), slog.String("error", err.Error()))
		}
	}
}
