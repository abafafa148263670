package webhooks

import (
	"github.com/riverqueue/river"

	"changebot/flows/rules"
)

// ProcessDeliveryJob returns the insert parameters of the job that
// processes stored delivery id (rules.ProcessDeliveryArgs on
// rules.QueueEvents), enqueued by the intake in its one transaction or by
// the Dispatcher; the delivery router works it.
func ProcessDeliveryJob(id int64) river.InsertManyParams {
	return river.InsertManyParams{Args: rules.ProcessDeliveryArgs{DeliveryID: id}, InsertOpts: &river.InsertOpts{Queue: rules.QueueEvents}}
}
