package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"changebot/store"
)

// errOtherKeyStored is what the case's Check returns when the other key of
// the pair is already stored.
var errOtherKeyStored = errors.New("the other key is stored")

// SaveSettingCheckSerialised: two writers of two different settings, each
// allowed only while the other is not stored (a rule between two settings,
// as settings.Cache.Set checks with SaveSettingParams.Check), never both
// succeed: Check runs under the one settings write lock and sees the other
// write once it committed. Twenty rounds of real concurrency; a refused
// write stores nothing and returns Check's error.
func testSaveSettingCheckSerialised(t *testing.T, open Open) {
	s := open(t)(Opts{})
	ctx := context.Background()
	keys := [2]string{"rule.a", "rule.b"}
	for round := range 20 {
		var wg sync.WaitGroup
		errs := [2]error{}
		start := make(chan struct{})
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				other := keys[1-i]
				_, errs[i] = s.SaveSetting(ctx, store.SaveSettingParams{Key: keys[i], Scope: "global",
					Value: json.RawMessage(fmt.Sprint(round)), UpdatedBy: "ops",
					Check: func(stored []store.Setting) error {
						for _, st := range stored {
							if st.Key == other {
								return errOtherKeyStored
							}
						}
						return nil
					}})
			}()
		}
		close(start)
		wg.Wait()
		stored, err := s.ListSettings(ctx, s.DB())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, st := range stored {
			if st.Key == keys[0] || st.Key == keys[1] {
				n++
			}
		}
		refused := 0
		for i, err := range errs {
			switch {
			case err == nil:
			case errors.Is(err, errOtherKeyStored):
				refused++
			default:
				t.Fatalf("round %d: writer %d: %v", round, i, err)
			}
		}
		if n != 1 || refused != 1 {
			t.Fatalf("round %d: %d of the two settings stored, %d writes refused; want exactly one of each", round, n, refused)
		}
		for _, k := range keys {
			if _, err := s.SaveSetting(ctx, store.SaveSettingParams{Key: k, Scope: "global", UpdatedBy: "ops"}); err != nil {
				t.Fatal(err)
			}
		}
	}
}
