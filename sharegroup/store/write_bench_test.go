package store

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/sharegroup"
)

// BenchmarkWrite measures durable writes of acknowledgements, each writer
// its own share-partition, straight to badger against through the change
// log: ns/op is the time per write with that many writers at once (group
// commits shared).
//
//	go test -run X -bench Write ./sharegroup/store/
func BenchmarkWrite(b *testing.B) {
	for _, mode := range []string{"badger", "log"} {
		for _, writers := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/writers=%d", mode, writers), func(b *testing.B) {
				dir := b.TempDir()
				db := openDB(b, dir)
				defer db.Close()
				opts := Options{Prefix: []byte("sg/")}
				if mode == "log" {
					opts.LogDir = dir + "/log"
				}
				s, err := Open(db, opts)
				require.NoError(b, err)
				defer s.Close()
				parts := make([]*sharegroup.Partition, writers)
				keys := make([]Key, writers)
				for i := range parts {
					keys[i] = Key{Group: "g", Partition: int32(i)}
					p, eff, err := sharegroup.New(sharegroup.DefaultConfig(), 1, 0)
					require.NoError(b, err)
					require.NoError(b, s.Write([]PartitionRecords{{Key: keys[i], Records: eff.Records}}))
					parts[i] = p
				}
				b.ResetTimer()
				var wg sync.WaitGroup
				for i := range writers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						p := parts[i]
						for n := i; n < b.N; n += writers {
							first := int64(n/writers) * 10
							_, eff := p.Acquire(at(1), "m", []sharegroup.LogBatch{{First: first, Last: first + 9}}, 10, sharegroup.RecordLimit)
							recs := eff.Records
							eff, err := p.Acknowledge(at(2), "m", []sharegroup.AckBatch{{First: first, Last: first + 9, Types: []sharegroup.AckType{sharegroup.AckAccept}}})
							if err != nil {
								b.Error(err)
								return
							}
							if err := s.Write([]PartitionRecords{{Key: keys[i], Records: append(recs, eff.Records...)}}); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
			})
		}
	}
}
