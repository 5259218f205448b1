package integration

import (
	"context"
	"crypto/x509/pkix"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	kgoscram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/stretchr/testify/require"
	"github.com/xdg-go/scram"
)

// xdgSCRAM adapts github.com/xdg-go/scram's client to sarama's
// SCRAMClient, as sarama's own examples do.
type xdgSCRAM struct {
	gen  scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (x *xdgSCRAM) Begin(user, pass, authz string) error {
	cl, err := x.gen.NewClient(user, pass, authz)
	if err != nil {
		return err
	}
	x.conv = cl.NewConversation()
	return nil
}
func (x *xdgSCRAM) Step(challenge string) (string, error) { return x.conv.Step(challenge) }
func (x *xdgSCRAM) Done() bool                            { return x.conv.Done() }

// TestSASLAndMTLSSarama: sarama produces and consumes in a consumer
// group with SCRAM-SHA-256 and -512 over SASL_SSL and with a client
// certificate over mTLS.
func TestSASLAndMTLSSarama(t *testing.T) {
	t.Parallel()
	e := startSASLBroker(t)
	ctx := testContext(t)
	e.addAlice(t, ctx)
	alice := e.ca.issue(t, pkix.Name{CommonName: "alice"}, false)
	for _, c := range []struct {
		name string
		addr string
		set  func(*sarama.Config)
	}{
		{"scram256", e.saslS, func(cfg *sarama.Config) {
			cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAM{gen: scram.SHA256} }
		}},
		{"scram512", e.saslS, func(cfg *sarama.Config) {
			cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAM{gen: scram.SHA512} }
		}},
		{"mtls", e.mtls, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := saramaConfig(sarama.V3_0_0_0)
			cfg.Net.TLS.Enable = true
			cfg.Net.TLS.Config = clientTLS(e.ca, alice.tlsCert(t))
			if c.set != nil {
				cfg.Net.SASL.Enable = true
				cfg.Net.SASL.Handshake = true
				cfg.Net.SASL.Version = sarama.SASLHandshakeV1
				cfg.Net.SASL.User, cfg.Net.SASL.Password = "alice", alicePassword
				c.set(cfg)
			}
			topic := "sarama-sec-" + c.name
			p, err := sarama.NewSyncProducer([]string{c.addr}, cfg)
			require.NoError(t, err)
			defer p.Close()
			for i := range 10 {
				_, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(fmt.Sprint(i))})
				require.NoError(t, err)
			}
			g, err := sarama.NewConsumerGroup([]string{c.addr}, "sarama-sec-"+c.name, cfg)
			require.NoError(t, err)
			defer g.Close()
			h := &countHandler{want: 10, done: make(chan struct{})}
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() {
				for cctx.Err() == nil {
					if err := g.Consume(cctx, []string{topic}, h); err != nil {
						return
					}
				}
			}()
			select {
			case <-h.done:
			case <-ctx.Done():
				t.Fatal("sarama consumer group did not read 10 messages")
			}
		})
	}
}

type countHandler struct {
	want int
	n    int
	done chan struct{}
}

func (h *countHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *countHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *countHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		s.MarkMessage(m, "")
		if h.n++; h.n == h.want {
			close(h.done)
		}
	}
	return nil
}

// TestSASLAndMTLSKafkaGo: kafka-go writes and reads in a consumer group
// with SCRAM-SHA-256 and SCRAM-SHA-512 over SASL_SSL and with a client
// certificate over mTLS.
func TestSASLAndMTLSKafkaGo(t *testing.T) {
	t.Parallel()
	e := startSASLBroker(t)
	ctx := testContext(t)
	e.addAlice(t, ctx)
	alice := e.ca.issue(t, pkix.Name{CommonName: "alice"}, false)
	mech256, err := kgoscram.Mechanism(kgoscram.SHA256, "alice", alicePassword)
	require.NoError(t, err)
	mech512, err := kgoscram.Mechanism(kgoscram.SHA512, "alice", alicePassword)
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		addr string
		mech sasl.Mechanism
	}{{"scram256", e.saslS, mech256}, {"scram512", e.saslS, mech512}, {"mtls", e.mtls, nil}} {
		t.Run(c.name, func(t *testing.T) {
			tc := clientTLS(e.ca, alice.tlsCert(t))
			tr := &kafka.Transport{TLS: tc}
			d := &kafka.Dialer{Timeout: 5 * time.Second, TLS: tc, DualStack: true}
			if c.mech != nil {
				tr.SASL, d.SASLMechanism = c.mech, c.mech
			}
			topic := "kafkago-sec-" + c.name
			w := &kafka.Writer{Addr: kafka.TCP(c.addr), Topic: topic, Transport: tr, AllowAutoTopicCreation: true,
				RequiredAcks: kafka.RequireAll, BatchTimeout: 10 * time.Millisecond}
			defer w.Close()
			var msgs []kafka.Message
			for i := range 10 {
				msgs = append(msgs, kafka.Message{Value: fmt.Appendf(nil, "m%d", i)})
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				err := w.WriteMessages(ctx, msgs...)
				if err == nil {
					break
				}
				require.True(t, time.Now().Before(deadline), "kafka-go write: %v", err)
				time.Sleep(200 * time.Millisecond) // the auto-created topic's metadata
			}
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{c.addr}, Topic: topic, GroupID: "kafkago-sec-" + c.name,
				Dialer: d, StartOffset: kafka.FirstOffset, MaxWait: 200 * time.Millisecond})
			defer r.Close()
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			for i := range 10 {
				m, err := r.ReadMessage(rctx)
				require.NoError(t, err)
				require.Equal(t, fmt.Sprintf("m%d", i), string(m.Value))
			}
		})
	}
}

// TestSASLAndMTLSKafkaPython: kafka-python (Debian's 2.0) produces and
// consumes in a group with SCRAM-SHA-256 and SCRAM-SHA-512 over SASL_SSL
// (its handshake is SaslHandshake v0 with bare tokens) and with a client
// certificate over mTLS.
func TestSASLAndMTLSKafkaPython(t *testing.T) {
	t.Parallel()
	if err := exec.Command(pythonPath, "-c", "import kafka").Run(); err != nil {
		missingTool(t, pythonPath+" cannot import kafka (apt-get install -y python3-kafka)")
	}
	e := startSASLBroker(t)
	ctx := testContext(t)
	e.addAlice(t, ctx)
	alice := e.ca.issue(t, pkix.Name{CommonName: "alice"}, false)
	crt, key, _ := alice.writeFiles(t, e.dir, "alice")
	caFile := filepath.Join(e.dir, "ca.pem")
	const script = `
import json, sys
from kafka import KafkaProducer, KafkaConsumer
addr, topic, mode, ca, crt, key, pw = sys.argv[1:8]
sec = dict(ssl_cafile=ca, ssl_check_hostname=False)
if mode.startswith("SCRAM"):
    sec.update(security_protocol="SASL_SSL", sasl_mechanism=mode, sasl_plain_username="alice", sasl_plain_password=pw)
else:
    sec.update(security_protocol="SSL", ssl_certfile=crt, ssl_keyfile=key)
p = KafkaProducer(bootstrap_servers=addr, acks="all", **sec)
for i in range(10):
    p.send(topic, ("py%d" % i).encode()).get(timeout=30)
p.flush()
c = KafkaConsumer(topic, bootstrap_servers=addr, group_id="py-" + mode, auto_offset_reset="earliest", consumer_timeout_ms=15000, **sec)
got = []
for m in c:
    got.append(m.value.decode())
    if len(got) == 10:
        break
c.commit()
print(json.dumps(got))
`
	for _, mode := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512", "mtls"} {
		addr := e.saslS
		if mode == "mtls" {
			addr = e.mtls
		}
		topic := "py-sec-" + strings.ToLower(mode)
		out := run(t, ctx, "", pythonPath, "-c", script, addr, topic, mode, caFile, crt, key, alicePassword)
		want := `["py0", "py1", "py2", "py3", "py4", "py5", "py6", "py7", "py8", "py9"]`
		require.Equal(t, want, strings.TrimSpace(out), mode)
	}
}
