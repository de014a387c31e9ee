package metrics

import "github.com/prometheus/client_golang/prometheus"

// The scrape-time families of bulkheads and retry budgets.
var (
	bulkheadInFlightDesc = prometheus.NewDesc(namespace+"_bulkhead_in_flight",
		"Runs holding a bulkhead permit, runs outstanding from earlier ticks included.", []string{"bulkhead"}, nil)
	bulkheadWaitingDesc = prometheus.NewDesc(namespace+"_bulkhead_waiting",
		"Modules waiting for a bulkhead permit.", []string{"bulkhead"}, nil)
	bulkheadAdmittedDesc = prometheus.NewDesc(namespace+"_bulkhead_admitted_total",
		"Bulkhead permits given.", []string{"bulkhead"}, nil)
	bulkheadRejectionsDesc = prometheus.NewDesc(namespace+"_bulkhead_rejections_total",
		"Modules a bulkhead refused (status rejected).", []string{"bulkhead"}, nil)
	retryFirstsDesc = prometheus.NewDesc(namespace+"_retry_budget_first_attempts_total",
		"First attempts counted by a retry budget.", []string{"budget"}, nil)
	retryRetriesDesc = prometheus.NewDesc(namespace+"_retry_budget_retries_total",
		"Retries a retry budget allowed.", []string{"budget"}, nil)
	retryRefusedDesc = prometheus.NewDesc(namespace+"_retry_budget_refused_total",
		"Retries a retry budget refused.", []string{"budget"}, nil)
)

// resilienceCollector reads the attached engine's bulkheads and retry budgets at scrape
// time.
type resilienceCollector struct{ c *Collectors }

// Describe sends the descriptors of the families.
func (rc resilienceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{bulkheadInFlightDesc, bulkheadWaitingDesc, bulkheadAdmittedDesc,
		bulkheadRejectionsDesc, retryFirstsDesc, retryRetriesDesc, retryRefusedDesc} {
		ch <- d
	}
}

// Collect reads the attached engine; it sends nothing before Attach.
func (rc resilienceCollector) Collect(ch chan<- prometheus.Metric) {
	e := rc.c.engine.Load()
	if e == nil {
		return
	}
	for _, b := range e.Bulkheads() {
		ch <- prometheus.MustNewConstMetric(bulkheadInFlightDesc, prometheus.GaugeValue, float64(b.InFlight), b.Name)
		ch <- prometheus.MustNewConstMetric(bulkheadWaitingDesc, prometheus.GaugeValue, float64(b.Waiting), b.Name)
		ch <- prometheus.MustNewConstMetric(bulkheadAdmittedDesc, prometheus.CounterValue, float64(b.Admitted), b.Name)
		ch <- prometheus.MustNewConstMetric(bulkheadRejectionsDesc, prometheus.CounterValue, float64(b.Rejections), b.Name)
	}
	for _, r := range e.RetryBudgetStates() {
		ch <- prometheus.MustNewConstMetric(retryFirstsDesc, prometheus.CounterValue, float64(r.Firsts), r.Name)
		ch <- prometheus.MustNewConstMetric(retryRetriesDesc, prometheus.CounterValue, float64(r.Retries), r.Name)
		ch <- prometheus.MustNewConstMetric(retryRefusedDesc, prometheus.CounterValue, float64(r.Refused), r.Name)
	}
}
