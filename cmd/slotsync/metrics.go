package main

import (
	"cmp"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	slotsync "github.com/slotsync/slotsync/sync"
)

// metrics are the daemon's Prometheus series (docs/CLI.md, "The daemon"), on a registry of their own.
type metrics struct {
	reg             *prometheus.Registry
	slotReady       *prometheus.GaugeVec
	syncLag         *prometheus.GaugeVec
	retainedWAL     *prometheus.GaugeVec
	consumerAhead   *prometheus.GaugeVec
	redelivery      *prometheus.GaugeVec
	copyAhead       *prometheus.GaugeVec
	slotInfo        *prometheus.GaugeVec
	serverSkips     *prometheus.GaugeVec
	runs            prometheus.Counter
	errs            *prometheus.CounterVec
	duration        prometheus.Histogram
	lastSuccess     prometheus.Gauge
	standbyRestarts prometheus.Counter
	nodeUp          *prometheus.GaugeVec
	promotionReady  prometheus.Gauge
	nodeIsPrimary   prometheus.Gauge
	withoutPrimary  prometheus.Gauge
	leftAlone       *prometheus.GaugeVec
	notReady        *prometheus.GaugeVec
	selection       *prometheus.GaugeVec
	notOurs         prometheus.Gauge
	journalErrs     prometheus.Counter
	journalErrsSeen int
	recordAge       prometheus.Gauge
}

// slotLabels are the labels of every per-slot series: alerts and dashboards group by database
// and plugin (which consumer kind) as well as by slot.
var slotLabels = []string{"slot", "database", "plugin"}

// The node labels of slotsync_node_up and slotsync_slot_retained_wal_bytes: the server beside the
// sidecar, and the primary it syncs from. Roles move; these do not.
const (
	nodeLocal    = "local"
	nodeUpstream = "upstream"
)

// nodeLabel is the node label of a node the engine names by the role it observes it in.
func nodeLabel(role string) string {
	if role == "primary" {
		return nodeUpstream
	}
	return nodeLocal
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	m.slotReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slotsync_slot_ready", Help: "1 when the slot's standby copy can be used after a promotion " +
		"without loss."}, slotLabels)
	m.notReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slotsync_slot_not_ready_reason", Help: "1 for each reason a slot's copy is NOT READY " +
		"(docs/CLI.md lists them; some only wait, some need a human)."}, append(slotLabels, "reason"))
	m.syncLag = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slotsync_slot_sync_lag_bytes", Help: "How far the standby copy's confirmed_flush trails the " +
		"primary's (0 when it does not; slotsync_slot_copy_ahead_bytes when it is ahead)."}, slotLabels)
	m.copyAhead = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slotsync_slot_copy_ahead_bytes", Help: "How far the standby copy's confirmed_flush is " +
		"ahead of its consumer's (a new copy waiting for its consumer; 0 when not ahead)."}, slotLabels)
	m.retainedWAL = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slotsync_slot_retained_wal_bytes", Help: "WAL the slot holds back on each " +
		"node (local: the server beside slotsync; upstream: the primary it syncs from)."}, append(slotLabels, "node"))
	m.slotInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slotsync_slot_info", Help: "1 for each slot slotsync judges or left alone: its " +
		"database and plugin, and its name as postgres_exporter labels it (slot_name), for joins."}, []string{"slot", "slot_name", "database", "plugin"})
	m.redelivery = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slotsync_slot_redelivery_bytes", Help: "READY copies: the WAL between the copy's " +
		"confirmed_flush and its consumer's, whose transactions a consumer resuming from the slot's position receives again after a promotion now."}, slotLabels)
	m.consumerAhead = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slotsync_slot_consumer_ahead_bytes", Help: "How far the consumer confirmed beyond the " +
		"standby's WAL."}, slotLabels)
	m.runs = prometheus.NewCounter(prometheus.CounterOpts{Name: "slotsync_sync_runs_total", Help: "Sync passes attempted."})
	m.errs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "slotsync_sync_errors_total", Help: "Failed passes (scope=pass) and failed slot actions " +
		"(scope=slot), by class (retry, skip_slot, stop)."}, []string{"class", "scope"})
	m.duration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "slotsync_sync_duration_seconds", Help: "Duration of sync passes.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}})
	m.lastSuccess = prometheus.NewGauge(prometheus.GaugeOpts{Name: "slotsync_last_success_timestamp_seconds", Help: "Unix time of the last successful pass."})
	m.standbyRestarts = prometheus.NewCounter(prometheus.CounterOpts{Name: "slotsync_standby_restarts_total", Help: "Standby restarts made by slotsync " +
		"(state-file method)."})
	m.nodeUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slotsync_node_up", Help: "1 when the last pass reached the node (local: the " +
		"server beside slotsync; upstream: the primary it syncs from)."}, []string{"node"})
	m.promotionReady = prometheus.NewGauge(prometheus.GaugeOpts{Name: "slotsync_promotion_ready", Help: "1 when every selected slot is ready (what check would " +
		"answer)."})
	m.nodeIsPrimary = prometheus.NewGauge(prometheus.GaugeOpts{Name: "slotsync_node_is_primary", Help: "1 when the local node is the primary (nothing to sync), " +
		"0 when it is a standby."})
	m.leftAlone = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slotsync_left_alone_slots", Help: "Standby logical slots slotsync does not sync: copies it " +
		"made and no longer syncs (made_by=slotsync; --drop-left-alone drops them), and slots it did not make (made_by=other)."}, []string{"made_by"})
	m.selection = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slotsync_primary_slots", Help: "The primary's logical slots (temporary ones left out) the " +
		"selection matches (selected=true) and leaves out (selected=false)."}, []string{"selected"})
	m.notOurs = prometheus.NewGauge(prometheus.GaugeOpts{Name: "slotsync_copies_not_ours", Help: "Standby slots of a selected primary slot's name that slotsync " +
		"has no record of making (a lost or corrupt journal, or another tool's): NOT READY, copy_not_ours; --adopt-copies makes them again."})
	m.journalErrs = prometheus.NewCounter(prometheus.CounterOpts{Name: "slotsync_journal_write_errors_total", Help: "Journal writes that failed (the state " +
		"directory full, read-only, or gone)."})
	m.recordAge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "slotsync_gate_record_age_seconds", Help: "Age of the gate record, the observation of the " +
		"primary the gate judges from without it (rule 8): past --max-record-age it cannot."})
	m.withoutPrimary = prometheus.NewGauge(prometheus.GaugeOpts{Name: "slotsync_gate_without_primary", Help: "1 when the last gate verdict was judged without " +
		"the primary, from the journal's last observation."})
	m.serverSkips = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slotsync_slot_server_sync_skips", Help: "PostgreSQL 19+, native method: how often the " +
		"server's slot sync skipped the copy (pg_stat_replication_slots.slotsync_skip_count), labelled with why it last did (slotsync_skip_reason; " +
		"none once a sync went through)."}, append(slotLabels[:3:3], "reason"))
	build := prometheus.NewGaugeVec(
		prometheus.GaugeOpts{Name: "slotsync_build_info", Help: "Build information."},
		[]string{"version", "commit", "date", "goversion"},
	)
	bi := currentBuild()
	build.WithLabelValues(bi.Version, bi.Commit, bi.Date, bi.GoVersion).Set(1)
	for _, c := range []prometheus.Collector{m.slotReady, m.notReady, m.syncLag, m.copyAhead, m.retainedWAL, m.consumerAhead, m.redelivery, m.slotInfo,
		m.serverSkips, m.runs, m.errs, m.duration, m.lastSuccess, m.standbyRestarts, m.nodeUp, m.promotionReady, m.nodeIsPrimary, m.withoutPrimary,
		m.leftAlone, m.selection, m.notOurs, m.journalErrs, m.recordAge, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	for _, class := range []string{"retry", "skip_slot", "stop"} {
		for _, scope := range []string{"pass", "slot"} {
			m.errs.WithLabelValues(class, scope)
		}
	}
	return m
}

// observe records one pass.
func (m *metrics) observe(rep slotsync.Report, err error) {
	m.runs.Inc()
	if j := rep.Journal; j != nil {
		if j.WriteErrors > m.journalErrsSeen {
			m.journalErrs.Add(float64(j.WriteErrors - m.journalErrsSeen))
			m.journalErrsSeen = j.WriteErrors
		}
		if !j.GateRecordAt.IsZero() {
			m.recordAge.Set(time.Since(j.GateRecordAt).Seconds())
		}
	}
	if err != nil {
		m.errs.WithLabelValues(slotsync.Classify(err).String(), "pass").Inc()
		var ne *slotsync.NodeError
		if errors.As(err, &ne) {
			m.nodeUp.WithLabelValues(nodeLabel(ne.Node)).Set(0)
		}
		m.withoutPrimary.Set(boolFloat(rep.WithoutPrimary != nil))
		m.promotionReady.Set(boolFloat(rep.WithoutPrimary != nil && rep.Ready()))
		// Per-slot series say what the last verdict was: with none made (a pass that failed
		// without judging), they go, rather than stay green from an older one.
		m.resetSlots()
		if rep.WithoutPrimary != nil {
			m.slotVerdicts(rep)
		}
		return
	}
	m.withoutPrimary.Set(0)
	m.nodeIsPrimary.Set(boolFloat(rep.Role == slotsync.RolePrimary))
	m.duration.Observe(rep.Duration.Seconds())
	m.standbyRestarts.Add(float64(rep.StandbyRestarts))
	m.lastSuccess.Set(float64(time.Now().Unix()))
	m.nodeUp.WithLabelValues(nodeLocal).Set(1)
	if rep.Role == slotsync.RolePrimary {
		m.nodeUp.DeleteLabelValues(nodeUpstream) // the local node is the primary: nothing is upstream
	} else {
		m.nodeUp.WithLabelValues(nodeUpstream).Set(1)
	}
	m.resetSlots() // slots that are gone disappear
	ours := 0
	for _, s := range rep.Slots {
		if s.LeftAlone {
			ours++
			m.slotInfo.WithLabelValues(s.Name, s.Name, s.Database, s.Plugin).Set(1)
			if s.Copy != nil {
				m.retainedWAL.WithLabelValues(s.Name, s.Database, s.Plugin, nodeLocal).Set(float64(s.CopyRetainedWALBytes))
			}
		}
	}
	if rep.Role == slotsync.RoleStandby {
		m.selection.WithLabelValues("true").Set(float64(rep.Selected))
		m.selection.WithLabelValues("false").Set(float64(len(rep.Unselected)))
	}
	notOurs := 0
	for _, s := range rep.Slots {
		if s.Code == slotsync.CodeNotOurs {
			notOurs++
		}
	}
	m.notOurs.Set(float64(notOurs))
	m.leftAlone.WithLabelValues("slotsync").Set(float64(ours))
	m.leftAlone.WithLabelValues("other").Set(float64(len(rep.StandbyOnly)))
	for _, s := range rep.Slots {
		if s.Error != "" {
			m.errs.WithLabelValues(s.ErrorClass, "slot").Inc()
		}
	}
	m.slotVerdicts(rep)
	m.promotionReady.Set(boolFloat(rep.Role == slotsync.RoleStandby && rep.Ready()))
}

func (m *metrics) resetSlots() {
	for _, v := range []*prometheus.GaugeVec{m.slotReady, m.notReady, m.syncLag, m.copyAhead, m.retainedWAL, m.consumerAhead, m.redelivery, m.slotInfo,
		m.serverSkips} {
		v.Reset()
	}
}

// slotVerdicts sets the per-slot series from a report's verdicts.
func (m *metrics) slotVerdicts(rep slotsync.Report) {
	for _, s := range rep.Slots {
		if !s.Gate {
			continue
		}
		m.slotInfo.WithLabelValues(s.Name, s.Name, s.Database, s.Plugin).Set(1)
		m.slotReady.WithLabelValues(s.Name, s.Database, s.Plugin).Set(boolFloat(s.Verdict.Ready))
		for _, r := range s.Verdict.Reasons {
			m.notReady.WithLabelValues(s.Name, s.Database, s.Plugin, string(r)).Set(1)
		}
		m.syncLag.WithLabelValues(s.Name, s.Database, s.Plugin).Set(float64(max(s.Verdict.SyncLagBytes, 0)))
		m.copyAhead.WithLabelValues(s.Name, s.Database, s.Plugin).Set(float64(s.Verdict.CopyAheadBytes))
		m.consumerAhead.WithLabelValues(s.Name, s.Database, s.Plugin).Set(float64(s.Verdict.ConsumerAheadBytes))
		if rd, ok := slotsync.RedeliveryOf(s, rep.WithoutPrimary != nil); ok {
			m.redelivery.WithLabelValues(s.Name, s.Database, s.Plugin).Set(float64(rd.Bytes))
		}
		if s.ServerSyncSkips > 0 || s.ServerSyncSkip != "" {
			m.serverSkips.WithLabelValues(s.Name, s.Database, s.Plugin, cmp.Or(s.ServerSyncSkip, "none")).Set(float64(s.ServerSyncSkips))
		}
		m.retainedWAL.WithLabelValues(s.Name, s.Database, s.Plugin, nodeUpstream).Set(float64(s.PrimaryRetainedWALBytes))
		if s.Copy != nil {
			m.retainedWAL.WithLabelValues(s.Name, s.Database, s.Plugin, nodeLocal).Set(float64(s.CopyRetainedWALBytes))
		}
	}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
