package faultsummary

// This file is the one definition of the summary's vocabularies: the module statuses, the
// tier statuses and the event types. Everything else that names them (the decision core,
// the invariant checker, the recorder's search, replay's inverse, the advisor, the HTTP
// description and the dashboard) reads these tables or is compared with them by a test.
// A new module status is a row here and a case in codeOf, the rule that decides it
// (cycle/decide), and its entries in api/openapi.yaml and daemon/ui/static/app.js, which tests
// compare with this table.

// Status is the outcome of one module in one tick, as the summary names it.
type Status string

// The module statuses (docs/architecture.md, "Module statuses"); their properties are the
// rows of the status table (see StatusCode).
const (
	StatusOK          Status = "ok"
	StatusRetried     Status = "retried"
	StatusFailed      Status = "failed"
	StatusTimedOut    Status = "timed_out"
	StatusBusy        Status = "busy"
	StatusOpen        Status = "open"
	StatusProbeOK     Status = "probe_ok"
	StatusProbeFailed Status = "probe_failed"
	StatusSkipped     Status = "skipped"
	StatusNotDue      Status = "not_due"
	StatusRejected    Status = "rejected"
	StatusShed        Status = "shed"
)

// StatusCode is a module status as a small number, the index of its row in the status
// table: the engine keeps one per module per tick in a record without pointers and reads
// a status's properties by indexing the table, without a lookup. The zero value, NoStatus,
// is a line no one decided yet; it is never published and has no property.
type StatusCode uint8

// The status codes, in table order.
const (
	NoStatus StatusCode = iota
	CodeOK
	CodeRetried
	CodeFailed
	CodeTimedOut
	CodeBusy
	CodeOpen
	CodeProbeOK
	CodeProbeFailed
	CodeSkipped
	CodeNotDue
	CodeRejected
	CodeShed
	numStatusCodes
)

// StatusInfo is what a module status means.
type StatusInfo struct {
	// Code is its index in the table; Name is its name in the summary.
	Code StatusCode
	Name Status
	// Nominal: not a degradation of its tier or its tick (a success, a module not due, or
	// one skipped: its tier, whose own status says the degradation, or an emergency-only
	// module outside emergency mode). The one meaning of "nominal".
	Nominal bool
	// Ran: the module was started this tick.
	Ran bool
	// Produced: the module produced a value this tick.
	Produced bool
	// Searchable: a search of recorded ticks may ask for it (GET /ticks?status=); the
	// recorder indexes the lines of the searchable statuses (ok and not_due, the lines of
	// nearly every tick, are not indexed).
	Searchable bool
	// Async: the end of an asynchronous module's run may have it.
	Async bool
	// Class is its colour class on the dashboard (daemon/ui/static/app.js, STATUS).
	Class string
	// Doc says what it means, in a few words.
	Doc string
}

// statusTable is the one definition of the module statuses, indexed by code.
var statusTable = [numStatusCodes]StatusInfo{
	CodeOK: {Name: StatusOK, Nominal: true, Ran: true, Produced: true, Async: true, Class: "ok",
		Doc: "succeeded on the first attempt"},
	CodeRetried: {Name: StatusRetried, Nominal: true, Ran: true, Produced: true, Searchable: true, Class: "retried",
		Doc: "succeeded after more than one attempt"},
	CodeFailed: {Name: StatusFailed, Ran: true, Searchable: true, Async: true, Class: "bad",
		Doc: "failed after all its attempts"},
	CodeTimedOut: {Name: StatusTimedOut, Ran: true, Searchable: true, Async: true, Class: "bad",
		Doc: "still running at the tier deadline: abandoned"},
	CodeBusy: {Name: StatusBusy, Searchable: true, Class: "warn",
		Doc: "still running from an earlier tick: not started"},
	CodeOpen: {Name: StatusOpen, Searchable: true, Class: "open",
		Doc: "refused by its breaker: not run"},
	CodeProbeOK: {Name: StatusProbeOK, Nominal: true, Ran: true, Produced: true, Searchable: true, Class: "probe",
		Doc: "ran as a half-open probe and succeeded"},
	CodeProbeFailed: {Name: StatusProbeFailed, Ran: true, Searchable: true, Class: "bad",
		Doc: "ran as a half-open probe and failed"},
	CodeSkipped: {Name: StatusSkipped, Nominal: true, Searchable: true, Class: "skip",
		Doc: "its tier was skipped, or it is emergency-only outside emergency mode"},
	CodeNotDue: {Name: StatusNotDue, Nominal: true, Class: "idle",
		Doc: "a multi-rate module not due this tick"},
	CodeRejected: {Name: StatusRejected, Searchable: true, Class: "warn",
		Doc: "refused by its bulkhead: not run"},
	CodeShed: {Name: StatusShed, Searchable: true, Class: "skip",
		Doc: "shed on overrun: not run, its last-known-good value served"},
}

func init() {
	for c := range statusTable {
		statusTable[c].Code = StatusCode(c)
	}
}

// codeOf returns the code of status s (NoStatus if s is not a module status). A switch,
// not a map: the engine asks once per module per tick (TestStatusTable checks it against
// the table).
func codeOf(s Status) StatusCode {
	switch s {
	case StatusOK:
		return CodeOK
	case StatusRetried:
		return CodeRetried
	case StatusFailed:
		return CodeFailed
	case StatusTimedOut:
		return CodeTimedOut
	case StatusBusy:
		return CodeBusy
	case StatusOpen:
		return CodeOpen
	case StatusProbeOK:
		return CodeProbeOK
	case StatusProbeFailed:
		return CodeProbeFailed
	case StatusSkipped:
		return CodeSkipped
	case StatusNotDue:
		return CodeNotDue
	case StatusRejected:
		return CodeRejected
	case StatusShed:
		return CodeShed
	}
	return NoStatus
}

// Statuses returns the rows of every module status, in table order (NoStatus excluded).
func Statuses() []StatusInfo { return append([]StatusInfo(nil), statusTable[1:]...) }

// Info returns the row of status code c.
func (c StatusCode) Info() StatusInfo { return statusTable[c] }

// Public returns the status as the summary names it ("" for NoStatus).
func (c StatusCode) Public() Status { return statusTable[c].Name }

// Nominal reports whether the status is not a degradation (see StatusInfo.Nominal).
func (c StatusCode) Nominal() bool { return statusTable[c].Nominal }

// Ran reports whether the module was started this tick.
func (c StatusCode) Ran() bool { return statusTable[c].Ran }

// Produced reports whether the module produced a value this tick.
func (c StatusCode) Produced() bool { return statusTable[c].Produced }

// Code returns the status's code (NoStatus if s is not a module status).
func (s Status) Code() StatusCode { return codeOf(s) }

// Info returns the status's row (the zero row, no property, if s is not a module status).
func (s Status) Info() StatusInfo { return statusTable[codeOf(s)] }

// Valid reports whether s is a module status.
func (s Status) Valid() bool { return codeOf(s) != NoStatus }

// Nominal reports whether the status is not a degradation of its tier or its tick (see
// StatusInfo.Nominal).
func (s Status) Nominal() bool { return statusTable[codeOf(s)].Nominal }

// Failing reports whether the status is a failure of the module: a valid status that is
// not nominal.
func (s Status) Failing() bool { c := codeOf(s); return c != NoStatus && !statusTable[c].Nominal }

// Ran reports whether the module was started this tick.
func (s Status) Ran() bool { return statusTable[codeOf(s)].Ran }

// Produced reports whether the status means the module produced a value this tick.
func (s Status) Produced() bool { return statusTable[codeOf(s)].Produced }

// Searchable reports whether a search of recorded ticks may ask for the status (see
// StatusInfo.Searchable).
func (s Status) Searchable() bool { return statusTable[codeOf(s)].Searchable }

// TierStatus is the outcome of one tier.
type TierStatus string

// The tier statuses.
const (
	// TierOK: every module of the tier succeeded (or was not due).
	TierOK TierStatus = "ok"
	// TierDegraded: some module failed but the tier's policy absorbed it.
	TierDegraded TierStatus = "degraded"
	// TierFailed: a module with fail_fast failed.
	TierFailed TierStatus = "failed"
	// TierSkipped: the tier did not run (emergency mode, an abort or an earlier failure).
	TierSkipped TierStatus = "skipped"
)

// TierStatusInfo is what a tier status means.
type TierStatusInfo struct {
	Name TierStatus
	// Class is its colour class on the dashboard (daemon/ui/static/app.js, TIER_STATUS).
	Class string
}

// tierStatusTable is the one definition of the tier statuses.
var tierStatusTable = [...]TierStatusInfo{
	{TierOK, "ok"},
	{TierDegraded, "warn"},
	{TierFailed, "bad"},
	{TierSkipped, "skip"},
}

// TierStatuses returns the rows of every tier status.
func TierStatuses() []TierStatusInfo { return append([]TierStatusInfo(nil), tierStatusTable[:]...) }

// Valid reports whether s is a tier status.
func (s TierStatus) Valid() bool {
	for _, t := range tierStatusTable {
		if t.Name == s {
			return true
		}
	}
	return false
}
