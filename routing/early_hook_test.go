package routing

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"changebot/flows"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/store"
)

// earlyFlow answers flows.ErrEarlyHook unless the context says the early
// waits are used up; then it applies the webhook ("applied") and counts it.
type earlyFlow struct{ applied *int }

func (f earlyFlow) ApplyHook(ctx context.Context, _ int64, _ platform.HookEvent) (string, error) {
	if flows.EarlyWaitAllowed(ctx) {
		return "", flows.ErrEarlyHook
	}
	*f.applied++
	return flows.OutcomeApplied, nil
}

// oneDelivery is a state-based stand-in for the delivery store: one stored
// delivery and the outcome recorded on it.
type oneDelivery struct{ outcome string }

func (*oneDelivery) DB() store.DBTX { return nil }

func (*oneDelivery) GetDelivery(_ context.Context, _ store.DBTX, id int64) (store.Delivery, error) {
	return store.Delivery{ID: id, Event: "Pipeline Hook", Body: []byte("{}")}, nil
}

func (d *oneDelivery) MarkDeliveryProcessed(_ context.Context, _ store.DBTX, _ int64, outcome string) error {
	d.outcome = outcome
	return nil
}

// TestEarlyHookSnoozes: a delivery the flow calls early (flows.ErrEarlyHook)
// snoozes 250 ms, 500 ms, 1 s, 2 s by the job's snooze count (River's
// metadata "snoozes"), and once those are used up is applied under
// flows.WithoutEarlyWait and its outcome recorded (issue 12 point 2).
func TestEarlyHookSnoozes(t *testing.T) {
	cases := []struct {
		snoozes int
		want    time.Duration // 0: applied
	}{
		{0, 250 * time.Millisecond},
		{1, 500 * time.Millisecond},
		{2, time.Second},
		{3, 2 * time.Second},
		{4, 0},
		{9, 0},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.snoozes), func(t *testing.T) {
			applied := 0
			st := &oneDelivery{}
			r, err := NewRouter(RouterConfig{Store: st, Flow: earlyFlow{applied: &applied}, Notes: recorder{got: new([]string)},
				Decode: func(string, []byte) (platform.HookEvent, error) { return platform.HookEvent{}, nil }})
			if err != nil {
				t.Fatal(err)
			}
			row := &rivertype.JobRow{ID: 1, Metadata: []byte(fmt.Sprintf(`{"snoozes": %d}`, tc.snoozes))}
			err = r.Worker().Work(context.Background(), &river.Job[rules.ProcessDeliveryArgs]{JobRow: row, Args: rules.ProcessDeliveryArgs{DeliveryID: 7}})
			var sn *rivertype.JobSnoozeError
			switch {
			case tc.want > 0 && (!errors.As(err, &sn) || sn.Duration != tc.want):
				t.Fatalf("after %d snoozes: %v, want a snooze of %s", tc.snoozes, err, tc.want)
			case tc.want > 0 && (applied != 0 || st.outcome != ""):
				t.Fatalf("a snoozed delivery was applied (%d) or recorded (%q)", applied, st.outcome)
			case tc.want == 0 && (err != nil || applied != 1 || st.outcome != flows.OutcomeApplied):
				t.Fatalf("after %d snoozes: err %v, applied %d, outcome %q; want applied once and recorded", tc.snoozes, err, applied, st.outcome)
			}
		})
	}
}
