package main

import (
	"github.com/shoal-mq/shoal/broker"
	"go.uber.org/zap"
)

// startShoal starts a Shoal broker in this process on a free port with its
// data in dir, fsyncing before acks as o.shoalFsync says.
func startShoal(o *options, dir string, logger *zap.Logger) ([]string, func() error, error) {
	cfg := broker.DefaultConfig()
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.DataDir = dir
	cfg.Fsync = broker.FsyncPolicy(o.shoalFsync)
	cfg.Logger = logger
	// The bench creates its topics with CreateTopics; auto-creation with
	// the same partition count is the fallback when that is not served.
	cfg.DefaultPartitions = o.partitions
	b, err := broker.Start(cfg)
	if err != nil {
		return nil, nil, err
	}
	return []string{b.Addr()}, b.Close, nil
}
