package store

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/sharegroup"
)

// TestSubmitRandomFailures: owners submit several writes of
// their share-partitions without waiting (one owner two keys, in joint
// batches), commits fail at random. Checked: a write queued behind a
// failed one of its keys fails (and so does every later one until the
// owner reloads); the stored state of every key is exactly
// its initial snapshot plus the records of the writes that succeeded, in
// submission order (Recover == Load), through compactions.
func TestSubmitRandomFailures(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(13, 13))
	db := openDB(t, t.TempDir())
	defer db.Close()
	s := New(db, Options{Prefix: []byte("sg/"), SnapshotEvery: 5, BeforeCommit: func() error {
		mu.Lock()
		defer mu.Unlock()
		if rng.IntN(6) == 0 {
			return errors.New("injected")
		}
		return nil
	}})
	cfg := sharegroup.DefaultConfig()
	const owners, rounds = 4, 150
	var wg sync.WaitGroup
	var unchained atomic.Int64
	defer func() { t.Logf("writes submitted after the previous one of the key finished: %d", unchained.Load()) }()
	for o := 0; o < owners; o++ {
		wg.Add(1)
		go func(o int) {
			defer wg.Done()
			keys := []Key{{Group: "g", Partition: int32(2 * o)}}
			if o == 0 {
				keys = append(keys, Key{Group: "g", Partition: 1})
			}
			parts := map[Key]*sharegroup.Partition{}
			durable := map[Key][]sharegroup.Record{}
			next := map[Key]int64{}
			for _, k := range keys {
				p, eff, err := sharegroup.New(cfg, 1, 0)
				require.NoError(t, err)
				for s.Write([]PartitionRecords{{Key: k, Records: eff.Records}}) != nil {
					_, err := s.LoadRecords(k) // as the broker reloads after a failure
					require.NoError(t, err)
				}
				parts[k], durable[k] = p, eff.Records
			}
			r := rand.New(rand.NewPCG(uint64(o), 7))
			for round := 0; round < rounds; round++ {
				type sub struct {
					w    *Pending
					recs map[Key][]sharegroup.Record
					// chained: the previous write of the key was
					// not finished when this one was submitted
					chained map[Key]bool
				}
				last := map[Key]*Pending{}
				var subs []sub
				for n := 1 + r.IntN(4); n > 0; n-- {
					recs := map[Key][]sharegroup.Record{}
					var batch []PartitionRecords
					for _, k := range keys {
						if len(keys) > 1 && r.IntN(3) == 0 {
							continue
						}
						off := next[k]
						cnt := int64(1 + r.IntN(3))
						p := parts[k]
						_, eff := p.Acquire(at(round), "m", []sharegroup.LogBatch{{First: off, Last: off + cnt - 1}}, int(cnt), sharegroup.RecordLimit)
						rec := eff.Records
						typ := sharegroup.AckAccept
						if r.IntN(4) == 0 {
							typ = sharegroup.AckRelease
						}
						eff, err := p.Acknowledge(at(round), "m", []sharegroup.AckBatch{{First: off, Last: off + cnt - 1, Types: []sharegroup.AckType{typ}}})
						require.NoError(t, err)
						rec = append(rec, eff.Records...)
						if typ == sharegroup.AckAccept || next[k] == off {
							next[k] = off + cnt
						}
						recs[k] = rec
						batch = append(batch, PartitionRecords{Key: k, Records: rec})
					}
					w := s.Submit(batch)
					chained := map[Key]bool{}
					for k := range recs {
						chained[k] = last[k] != nil && !last[k].Done()
						last[k] = w
					}
					subs = append(subs, sub{w, recs, chained})
				}
				failed := map[Key]bool{}
				for _, sb := range subs {
					err := sb.w.Wait()
					for k, rec := range sb.recs {
						if !sb.chained[k] {
							unchained.Add(1)
						}
						if failed[k] && sb.chained[k] {
							if err == nil {
								for i, x := range subs {
									var ks []int32
									for kk := range x.recs {
										ks = append(ks, kk.Partition)
									}
									t.Logf("sub %d keys %v chained %v err %v self=%v", i, ks, x.chained, x.w.err, x.w == sb.w)
								}
							}
							require.Error(t, err, "owner %d round %d key %v: write behind a failed one", o, round, k)
						}
						failed[k] = err != nil // what the next write of k, if chained to this one, must do
						if err == nil {
							durable[k] = append(durable[k], rec...)
						}
					}
				}
				for _, k := range keys {
					want, err := sharegroup.Recover(cfg, durable[k])
					require.NoError(t, err)
					got, found, err := s.Load(k, cfg)
					require.NoError(t, err)
					require.True(t, found)
					require.Equal(t, want.Snapshot(), got.Snapshot(), "owner %d key %v round %d", o, k, round)
					parts[k] = got // reload as the broker does after a failure (and always, here)
					next[k] = got.SPSO()
					durable[k] = []sharegroup.Record{got.Snapshot()}
				}
			}
		}(o)
	}
	wg.Wait()
}
