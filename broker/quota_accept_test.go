package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// served dials and reports whether the broker answers an ApiVersions on
// the new connection within wait (false: closed or silent).
func served(t *testing.T, b *Broker, wait time.Duration) (net.Conn, bool) {
	nc, err := net.Dial("tcp", b.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	return nc, answers(nc, wait)
}

func answers(nc net.Conn, wait time.Duration) bool {
	req := kmsg.NewApiVersionsRequest()
	body := binary.BigEndian.AppendUint16(nil, 18)
	body = binary.BigEndian.AppendUint16(body, 0)
	body = binary.BigEndian.AppendUint32(body, 1)
	body = binary.BigEndian.AppendUint16(body, 0xffff) // null client id
	body = req.AppendTo(body)
	nc.SetDeadline(time.Now().Add(wait))
	if _, err := nc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)); err != nil {
		return false
	}
	var hdr [4]byte
	_, err := io.ReadFull(nc, hdr[:])
	return err == nil
}

// TestConnectionLimits: max.connections.per.ip closes one connection
// too many at once; max.connections makes a new one wait until another
// closes; connection_creation_rate on the ip entity closes connections
// opened faster than the rate.
func TestConnectionLimits(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	cl := newClient(t, b)
	require.NoError(t, cl.Ping(context.Background()))
	adm := kadm.NewClient(cl)
	open := func() int {
		return b.quotas.Conns().Open()
	}
	setBrokerConfig(t, adm, "max.connections.per.ip", "100") // the admin client's connections are open
	setBrokerConfig(t, adm, "max.connections.per.ip", fmt.Sprint(open()+2))
	_, ok1 := served(t, b, 5*time.Second)
	_, ok2 := served(t, b, 5*time.Second)
	_, ok3 := served(t, b, 5*time.Second)
	require.True(t, ok1 && ok2)
	require.False(t, ok3, "the fourth connection from 127.0.0.1 is closed")
	setBrokerConfig(t, adm, "max.connections.per.ip", "2147483647")

	setBrokerConfig(t, adm, "max.connections", fmt.Sprint(open()))
	waiting, ok := served(t, b, 300*time.Millisecond)
	require.False(t, ok, "at max.connections a new connection waits")
	waiting.Close()
	setBrokerConfig(t, adm, "max.connections", "2147483647")
	_, ok = served(t, b, 5*time.Second)
	require.True(t, ok, "accepted once the limit allows")

	setQuota(t, adm, qEntity(sp("ip"), nil), map[string]float64{"connection_creation_rate": 2, "quota_mode": 1})
	n := 0
	for i := 0; i < 6; i++ {
		if _, ok := served(t, b, 5*time.Second); ok {
			n++
		}
	}
	require.Equal(t, 3, n, "the burst (one second: 2) and one into debt")
	time.Sleep(1600 * time.Millisecond)
	_, ok = served(t, b, 5*time.Second)
	require.True(t, ok, "the rate allows another after the debt is paid")
}
