package rules

// Job kinds (persisted in river_job.kind: never rename one).
const (
	KindRequestApproval = "request_approval"
	KindCreateMR        = "create_merge_request"
	KindAwaitPipeline   = "await_pipeline"
	KindHandle          = "handle_merge_request"
	KindAwaitDeploy     = "await_deploy"
	KindProcessDelivery = "process_delivery"
	KindRefreshNote     = "refresh_status_note"
	KindCloseMR         = "close_merge_request"
)

// ProcessDeliveryArgs processes one stored webhook delivery.
type ProcessDeliveryArgs struct {
	DeliveryID int64 `json:"delivery_id"`
}

// Kind implements river.JobArgs.
func (ProcessDeliveryArgs) Kind() string { return KindProcessDelivery }

// Queues. Step jobs work in QueueDefault, webhook deliveries in
// QueueEvents and status-note refreshes in QueueNotes, so that a burst of
// one kind never queues the others behind it: a change's next step does not
// wait for the status comments of other changes to be edited.
const (
	QueueDefault = "default"
	QueueEvents  = "events"
	QueueNotes   = "notes"
)

// KindReconcile is the periodic reconciler's job kind (persisted).
const KindReconcile = "reconcile_merged"

// KindSweep is the stuck-step sweeper's job kind (persisted).
const KindSweep = "sweep_stuck_steps"
