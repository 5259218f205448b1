package topics

import (
	"errors"
	"time"

	"go.uber.org/zap"
)

// EnforceRetention applies retention.ms and retention.bytes to every
// partition as of now (the broker's retention loop calls it every
// log.retention.check.interval.ms), waking the waiters of each partition
// whose log start moved.
func (r *Registry) EnforceRetention(now time.Time, lg *zap.Logger) {
	for _, t := range r.All() {
		parts, _ := r.Snapshot(t)
		for _, p := range parts {
			n, err := p.Log.EnforceRetention(now)
			if err != nil {
				lg.Error("retention failed", zap.String("topic", t.Name), zap.Int32("partition", p.Index), zap.Error(err))
			} else if n > 0 {
				lg.Info("retention deleted segments", zap.String("topic", t.Name), zap.Int32("partition", p.Index), zap.Int64("bytes", n))
				// The log start moved: fetches waiting below it get
				// OFFSET_OUT_OF_RANGE now, and share fetches what the
				// share-partition's advanced window frees.
				p.Notify()
			}
		}
	}
}

// Close closes every partition log (at shutdown, once nothing appends).
func (r *Registry) Close() error {
	var errs []error
	for _, t := range r.All() {
		parts, _ := r.Snapshot(t)
		for _, p := range parts {
			errs = append(errs, p.Log.Close())
		}
	}
	return errors.Join(errs...)
}
