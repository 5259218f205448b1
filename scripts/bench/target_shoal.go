package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker"
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

// startShoalSASLSSL starts Shoal with one SASL_SSL listener: a
// certificate made here (ECDSA P-256, TLS 1.3 negotiated by kgo), a
// SCRAM-SHA-512 user added before start (as `shoal scram add` does),
// with acls the authorizer on and the bench user's ACLs among 10,000
// others (benchACLs), and sets the clients' TLS and SASL options. Compared
// with startShoal it measures what TLS, authentication and
// authorization cost.
func startShoalSASLSSL(o *options, dir string, logger *zap.Logger, acls bool) ([]string, func() error, error) {
	certPEM, keyPEM, pool, err := selfSigned()
	if err != nil {
		return nil, nil, err
	}
	keystore := filepath.Join(dir, "bench-broker.pem")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(keystore, append(keyPEM, certPEM...), 0o600); err != nil {
		return nil, nil, err
	}
	const user, pass = "bench", "bench-secret"
	const admin, adminPass = "bench-admin", "bench-admin-secret"
	dataDir := filepath.Join(dir, "data")
	for u, p := range map[string]string{user: pass, admin: adminPass} {
		if err := broker.ScramAdd(dataDir, "SCRAM-SHA-512", u, p, 4096); err != nil {
			return nil, nil, err
		}
	}
	cfg := broker.DefaultConfig()
	cfg.Listeners = "SASL_SSL://127.0.0.1:0"
	cfg.Security = map[string]string{"ssl.keystore.location": keystore, "sasl.enabled.mechanisms": "SCRAM-SHA-512"}
	if acls {
		cfg.Security["authorizer.class.name"], cfg.Security["super.users"] = "acl", "User:"+admin
	}
	cfg.DataDir = dataDir
	cfg.Fsync = broker.FsyncPolicy(o.shoalFsync)
	cfg.Logger = logger
	cfg.DefaultPartitions = o.partitions
	b, err := broker.Start(cfg)
	if err != nil {
		return nil, nil, err
	}
	tlsCfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	if acls {
		if err := benchACLs(b.Addr(), tlsCfg, scram.Auth{User: admin, Pass: adminPass}.AsSha512Mechanism(), "User:"+user); err != nil {
			b.Close()
			return nil, nil, fmt.Errorf("bench ACLs: %w", err)
		}
	}
	o.clientOpts = []kgo.Opt{
		kgo.DialTLSConfig(tlsCfg),
		kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()),
	}
	return []string{b.Addr()}, b.Close, nil
}

// benchACLs gives principal what the bench's clients do (every topic,
// group and transactional id; Create, IdempotentWrite and Describe on
// the cluster) and adds 10,000 ACLs of other principals, literal and
// prefixed, so that every check searches an index of a realistic size.
func benchACLs(addr string, tlsCfg *tls.Config, m sasl.Mechanism, principal string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(tlsCfg), kgo.SASL(m))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	create := func(b *kadm.ACLBuilder) error {
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil {
				return r.Err
			}
		}
		return nil
	}
	if err := create(kadm.NewACLs().Allow(principal).Topics("*").Groups("*").TransactionalIDs("*").Operations(kadm.OpAll)); err != nil {
		return err
	}
	if err := create(kadm.NewACLs().Allow(principal).Clusters().Operations(kadm.OpCreate, kadm.OpIdempotentWrite, kadm.OpDescribe)); err != nil {
		return err
	}
	for i := 0; i < 100; i++ { // 100 requests of 100: 5,000 literal and 5,000 prefixed
		b := kadm.NewACLs().Allow(fmt.Sprintf("User:other-%d", i)).Operations(kadm.OpRead, kadm.OpWrite)
		var lit, pre []string
		for j := 0; j < 25; j++ {
			lit = append(lit, fmt.Sprintf("team-%d-topic-%d", i, j))
			pre = append(pre, fmt.Sprintf("team-%d-%d-", i, j))
		}
		if err := create(b.Topics(lit...)); err != nil {
			return err
		}
		if err := create(kadm.NewACLs().Allow(fmt.Sprintf("User:other-%d", i)).Operations(kadm.OpRead, kadm.OpWrite).
			Topics(pre...).ResourcePatternType(kadm.ACLPatternPrefixed)); err != nil {
			return err
		}
	}
	return nil
}

// selfSigned makes a self-signed server certificate for 127.0.0.1.
func selfSigned() (certPEM, keyPEM []byte, pool *x509.CertPool, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "shoal-bench"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), pool, nil
}

// startShoalCluster starts three Shoal brokers in this process, a raft
// cluster on 127.0.0.1 (docs/CLUSTER.md) with their data under dir:
// every partition has three replicas, and a produce is answered once two
// of them have it fsynced. The three share this machine's cores and
// disk, as the cluster criteria (C9, C10) measure it.
func startShoalCluster(o *options, dir string, logger *zap.Logger) ([]string, func() error, error) {
	var peers []string
	for i := 1; i <= 3; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		peers = append(peers, fmt.Sprintf("%d@%s", i, ln.Addr()))
		_ = ln.Close()
	}
	voters := strings.Join(peers, ",")
	var brokers []*broker.Broker
	var seeds []string
	stop := func() error {
		var errs []error
		for _, b := range brokers {
			errs = append(errs, b.Close())
		}
		return errors.Join(errs...)
	}
	// Started together, as the processes of a real cluster are: each
	// Start waits (up to 10 s) until its broker caught up with the
	// metadata log, which takes a quorum.
	started := make([]*broker.Broker, 3)
	startErrs := make([]error, 3)
	var wg sync.WaitGroup
	for i := 1; i <= 3; i++ {
		cfg := broker.DefaultConfig()
		cfg.ListenAddr = "127.0.0.1:0"
		cfg.DataDir = filepath.Join(dir, fmt.Sprint(i))
		cfg.Fsync = broker.FsyncPolicy(o.shoalFsync)
		cfg.Logger = logger.With(zap.Int("node", i))
		cfg.DefaultPartitions = o.partitions
		cfg.NodeID, cfg.Voters = int32(i), voters
		wg.Go(func() { started[i-1], startErrs[i-1] = broker.Start(cfg) })
	}
	wg.Wait()
	for _, b := range started {
		if b != nil {
			brokers = append(brokers, b)
			seeds = append(seeds, b.Addr())
		}
	}
	if err := errors.Join(startErrs...); err != nil {
		_ = stop()
		return nil, nil, err
	}
	// Topics need the three registered: wait for them (with franz-go's
	// metadata cache off, or it answers from a stale view).
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(10*time.Millisecond), kgo.MetadataMaxAge(100*time.Millisecond))
	if err != nil {
		_ = stop()
		return nil, nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
		if err == nil && len(md.Brokers) == 3 && md.Controller > 0 {
			break
		}
		if ctx.Err() != nil {
			_ = stop()
			return nil, nil, fmt.Errorf("shoal-cluster: brokers never registered: %v (%d brokers, controller %d)", err, len(md.Brokers), md.Controller)
		}
		time.Sleep(50 * time.Millisecond)
	}
	o.replicationFactor = -1 // every broker hosts every partition (shoal-cluster-rf1: one)
	o.offsetGaps = true      // each term's first entry is raft's own
	return seeds, stop, nil
}
