package replica

import (
	"go.etcd.io/raft/v3"
	"go.uber.org/zap"
)

// raftLogger is etcd raft's Logger on zap. Raft logs every election and
// configuration change at Info; they go out at Debug, except warnings
// and errors.
type raftLogger struct{ s *zap.SugaredLogger }

// SetRaftLogger sends etcd raft's logs to l (raft's logger is global:
// set once per process, before the first replica starts).
func SetRaftLogger(l *zap.Logger) {
	raft.SetLogger(newRaftLogger(l))
}

func newRaftLogger(l *zap.Logger) raft.Logger {
	return raftLogger{l.WithOptions(zap.AddCallerSkip(1)).Named("raft").Sugar()}
}

func (r raftLogger) Debug(v ...any)                   { r.s.Debug(v...) }
func (r raftLogger) Debugf(format string, v ...any)   { r.s.Debugf(format, v...) }
func (r raftLogger) Error(v ...any)                   { r.s.Error(v...) }
func (r raftLogger) Errorf(format string, v ...any)   { r.s.Errorf(format, v...) }
func (r raftLogger) Info(v ...any)                    { r.s.Debug(v...) }
func (r raftLogger) Infof(format string, v ...any)    { r.s.Debugf(format, v...) }
func (r raftLogger) Warning(v ...any)                 { r.s.Warn(v...) }
func (r raftLogger) Warningf(format string, v ...any) { r.s.Warnf(format, v...) }
func (r raftLogger) Fatal(v ...any)                   { r.s.Fatal(v...) }
func (r raftLogger) Fatalf(format string, v ...any)   { r.s.Fatalf(format, v...) }
func (r raftLogger) Panic(v ...any)                   { r.s.Panic(v...) }
func (r raftLogger) Panicf(format string, v ...any)   { r.s.Panicf(format, v...) }
