package security

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/meta"
)

// TestCredentialsCopyTheirInputs: a request's byte fields alias the
// connection's frame buffer, which the next request overwrites; a
// credential made from them must not change with it. (Found by
// librdkafka failing SCRAM after a CreateAcls sent on the connection
// that had added the user: the salt held the ACL's bytes.)
func TestCredentialsCopyTheirInputs(t *testing.T) {
	m, err := meta.Open(t.TempDir(), zap.NewNop())
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	c, err := LoadCredentials(m)
	require.NoError(t, err)
	frame := []byte("0123456789abcdef0123456789abcdef")
	salt := frame[:16]
	salted, err := SaltedPassword(ScramSHA512, "secret", salt, MinScramIterations)
	require.NoError(t, err)
	require.NoError(t, c.Apply([]Change{{Mechanism: ScramSHA512, User: "u", Salt: salt, Salted: salted, Iterations: MinScramIterations}}))
	copy(frame, "the next request overwrites this")
	require.Equal(t, "0123456789abcdef", c.lookup(ScramSHA512, "u").Salt)
	require.True(t, c.CheckPlain("u", "secret"))
}
